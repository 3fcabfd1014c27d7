"""The writer: applies one batch of events inside the caller's transaction.

Every write is an idempotent upsert keyed by the contract's identities (a
session is (source, cwd, session_id); a message is (session, message_id)), so
reading the same line twice, after a crash or a rename, never duplicates.
Secrets are redacted here, before anything is written.
"""

from __future__ import annotations

import os
import weakref
from collections import Counter
from dataclasses import dataclass

import apsw
import orjson

from ..model import ForgetEvent, KeepEvent, LeafTitleEvent, MessageEvent, SessionEvent, TitleEvent
from ..paths import recorded, through_links
from ..rows import one
from ..text.redact import PENDING, Redactor
from ..text.tokens import body_tokens, index_body, index_body_form
from .project import is_prompt, prompt_title, strip_escapes


def fts_body(text: str, attachment_names: list[str]) -> tuple[str, bool, int]:
    """The FTS5 document of one message (its text, then its attachment
    names), whether the text is in NFKC already (messages.nfkc: recall then
    folds it without normalizing), and its tokens (messages.ntok: the
    statistics of a confined caller's scope, query/rank.py)."""
    body, nfkc = index_body_form(text)
    if attachment_names:
        body += "\n" + index_body("\n".join(attachment_names))
    return body, nfkc, body_tokens(body)


def stored_body(text: str, attachments: str | None) -> str:
    """The FTS5 document of a stored message (its text and its attachments'
    JSON as `messages` holds them): what the writer gave FTS5 for it."""
    return fts_body(text, [a["name"] for a in orjson.loads(attachments)] if attachments else [])[0]


@dataclass
class Prepared:
    """The redacted text, attachments and FTS5 body of a message, computed
    where the message was parsed (indexer.pipeline), so that the writer only
    writes; it redoes the work only for a delta that appends to stored text."""

    text: str
    secrets: int
    attachments: str | None  # JSON, names redacted
    names: list[str]
    body: str
    nfkc: bool
    ntok: int


def prepare(ev: MessageEvent, redactor: Redactor) -> Prepared:
    text, n = redactor.redact(ev.text)
    names: list[str] = []
    atts = None
    if ev.attachments:
        items = []
        for a in ev.attachments:
            d = a.model_dump()
            d["name"], k = redactor.redact(a.name)
            d["id"], j = redactor.redact_id(a.id)
            if redactor.holds_secret(a.mime_type):  # a media type is no place for one: the default
                d["mime_type"], j = "application/octet-stream", j + 1
            n += k + j
            names.append(d["name"])
            items.append(d)
        atts = orjson.dumps(items).decode()
    return Prepared(text, n, atts, names, *fts_body(text, names))


# The held words (Writer.held) of each open database, by its Store object:
# shared by the passes of one process over it (the watcher's), forgotten when
# it is closed and dropped. The indexer's own state: the Store does not hold it.
_HELD: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def held_tails(store: object) -> dict[tuple[int, str], str]:
    """The held words of the streams written through `store` (an open Store)."""
    return _HELD.setdefault(store, {})


class Writer:
    def __init__(self, conn: apsw.Connection, redactor: Redactor, held: dict | None = None):
        self.conn = conn
        self.redactor = redactor
        # The last word of each streaming message that may be a secret's head,
        # kept out of the database (Redactor.stream); shared by the passes of
        # one process (the watcher's), lost with it, which is safe.
        self.held: dict[tuple[int, str], str] = {} if held is None else held
        self._sessions: dict[tuple[str, str, str], int] = {}
        self._next_seq: dict[int, int] = {}
        self._prompted: set[int] = set()  # sessions whose prompt is set (or was tried) in this pass
        self._leaves: bool | None = None  # whether any title waits for its leaf (None: not looked yet)
        self.counts: Counter[str] = Counter()
        # Messages and index tokens each session gained in the batch being
        # applied, added to its totals (sessions.n_messages, n_tokens) at the
        # end of the batch, in its transaction (migration m010 says why not
        # by trigger).
        self._totals: dict[int, list[int]] = {}
        # Events refused here, by reason (a delta after its message settled);
        # the caller records them with the batch, like lines the parser skipped.
        self.skips: Counter[str] = Counter()
        # The batch's changes to the FTS5 table, made at its end (_index):
        # the bodies to insert by row id, the rows of earlier batches whose
        # FTS5 rows go, and the rows this batch inserted.
        self._bodies: dict[int, str] = {}
        self._gone: set[int] = set()
        self._new: set[int] = set()

    def forget(self) -> None:
        """Drop caches after a rollback, so nothing refers to undone rows."""
        self._sessions.clear()
        self._next_seq.clear()
        self._prompted.clear()
        self._leaves = None
        self._totals.clear()
        self._clear_index()
        self.skips.clear()

    def _clear_index(self) -> None:
        self._bodies.clear()
        self._gone.clear()
        self._new.clear()

    def _redact(self, text: str) -> str:
        """For titles, which may come redacted already (a title a parser kept
        in its state until its session opened): placeholders are kept.
        Terminal escapes are no more part of a title than of a message."""
        text, n = self.redactor.redact(strip_escapes(text), keep_placeholders=True)
        self.counts["secrets_redacted"] += n
        return text

    def session_row(self, source: str, cwd: str, session_id: str, started_at: str | None = None) -> int:
        # Every message names its session: the cache is asked first with the
        # cwd as the event wrote it (normalising it costs more than the rest).
        row = self._sessions.get((source, cwd, session_id))
        if row is not None:
            return row
        raw = (source, cwd, session_id)
        # An id is shown: one that holds a secret is stored as its keyed hash
        # (the same for every read of it; Redactor.redact_key).
        session_id = self.redactor.redact_key(session_id)
        # The cwd is normalised here, once (lexically, never through symlinks):
        # the gates compare it as stored (session_recall/paths.py); its
        # spelling through the links of today is kept beside it, for the
        # allow- and denylists (cwd_links, migration m012). Normalising
        # a normalised cwd changes nothing, so the two keys can share the cache.
        cwd = recorded(cwd)
        key = (source, cwd, session_id)
        row = self._sessions.get(key)
        if row is None:
            self.conn.execute(
                "INSERT INTO sessions(source, cwd, session_id, started_at, cwd_links) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(source, cwd, session_id) DO NOTHING",
                (source, cwd, session_id, started_at, through_links(cwd)),
            )
            row = one(self.conn.execute(
                "SELECT id FROM sessions WHERE source = ? AND cwd = ? AND session_id = ?", key
            ))[0]
            self._sessions[key] = row
        self._sessions[raw] = row
        return row

    def apply(self, source: str, file_id: int, events) -> None:
        """Write one batch's events (the caller moves the generation on)."""
        try:
            self._apply(source, file_id, events)
            self._index()
        except BaseException:
            self._totals.clear()  # the caller rolls the batch back
            self._clear_index()
            raise
        for session, (n, tokens) in self._totals.items():
            self.conn.execute("UPDATE sessions SET n_messages = n_messages + ?, n_tokens = n_tokens + ? WHERE id = ?",
                              (n, tokens, session))
        self._totals.clear()

    def _index(self) -> None:
        """The batch's FTS5 changes, deletes first, then inserts, each in row
        id order. FTS5 flushes its pending inserts to a new segment whenever
        a row id at or below the last one written is deleted or inserted, so
        a streamed message's delete and insert after other messages' inserts
        cost a segment each: half the writer's time on a 40 MB `mixed`
        build (docs/benchmarks.md). A message written several times in one
        batch (a stream's deltas) is inserted once, with its last body."""
        if self._gone:
            self.conn.executemany("DELETE FROM message_fts WHERE rowid = ?", ((r,) for r in sorted(self._gone)))
        if self._bodies:
            self.conn.executemany("INSERT INTO message_fts(rowid, body) VALUES (?, ?)", sorted(self._bodies.items()))
        self._clear_index()

    def _reindex(self, rowid: int, body: str | None) -> None:
        """A message's FTS5 row gets `body` (None: goes) at the end of the
        batch; a row of an earlier batch is deleted first."""
        if rowid not in self._new:
            self._gone.add(rowid)
        if body is None:
            self._bodies.pop(rowid, None)
        else:
            self._bodies[rowid] = body

    def _count(self, session: int, messages: int, tokens: int) -> None:
        """Add to a session's totals at the end of the batch."""
        t = self._totals.setdefault(session, [0, 0])
        t[0] += messages
        t[1] += tokens

    def _ids(self, ev: MessageEvent) -> MessageEvent:
        """The event with its message and turn ids stored as they are shown
        (Redactor.redact_key), and a timestamp that holds a secret dropped (it
        is no time: the message is outside every time range)."""
        mid, tid = self.redactor.redact_key(ev.message_id), self.redactor.redact_key(ev.turn_id)
        ts = "" if self.redactor.holds_secret(ev.ts) else ev.ts
        if (mid, tid, ts) == (ev.message_id, ev.turn_id, ev.ts):
            return ev
        self.counts["secrets_redacted"] += (mid != ev.message_id) + (tid != ev.turn_id) + (ts != ev.ts)
        return ev.model_copy(update={"message_id": mid, "turn_id": tid, "ts": ts})

    def _apply(self, source: str, file_id: int, events) -> None:
        key = self.redactor.redact_key
        for ev in events:
            if isinstance(ev, MessageEvent):
                self._message(source, file_id, self._ids(ev))
            elif isinstance(ev, SessionEvent):
                row = self.session_row(source, ev.cwd, ev.session_id, ev.started_at)
                # The earliest start wins: a session whose sub-agent file is
                # read before its own file starts when the session did.
                self.conn.execute(
                    "UPDATE sessions SET started_at = CASE WHEN started_at IS NULL OR ?1 < started_at "
                    "THEN ?1 ELSE started_at END WHERE id = ?2", (ev.started_at, row))
                if ev.title:
                    self._title(row, ev.title, ev.title_rank)
            elif isinstance(ev, TitleEvent):
                self._title(self.session_row(source, ev.cwd, ev.session_id), ev.title, ev.rank)
            elif isinstance(ev, LeafTitleEvent):
                self._leaf_title(source, file_id, ev.model_copy(update={"leaf": key(ev.leaf)}))
            elif isinstance(ev, ForgetEvent):
                self._forget(source, file_id, ev.model_copy(update={"message_ids": [key(m) for m in ev.message_ids]}))
            elif isinstance(ev, KeepEvent):
                self._keep(source, file_id, ev.model_copy(update={"message_ids": [key(m) for m in ev.message_ids]}))

    def _keep(self, source: str, file_id: int, ev: KeepEvent) -> None:
        """Of this log's messages in the session, only `message_ids` remain."""
        session = self.session_row(source, ev.cwd, ev.session_id)
        keep = set(ev.message_ids)
        for rowid, message_id in list(self.conn.execute(
                "SELECT id, message_id FROM messages WHERE session = ? AND file_id = ?", (session, file_id))):
            if message_id not in keep:
                self._reindex(rowid, None)
                self.conn.execute("DELETE FROM messages WHERE id = ?", (rowid,))
                self.held.pop((session, message_id), None)
                self.counts["messages_forgotten"] += 1

    def _title(self, session: int, title: str, rank: int) -> None:
        """Title the session unless its title came with a higher rank."""
        self.conn.execute("UPDATE sessions SET title = ?1, title_rank = ?2 WHERE id = ?3 AND title_rank <= ?2",
                          (self._redact(title), rank, session))

    def _leaf_title(self, source: str, file_id: int, ev: LeafTitleEvent) -> None:
        """Keep the title with its leaf, and title the session that holds the
        leaf if it is indexed already (else _message does when it comes)."""
        title = self._redact(ev.title)
        self.conn.execute(
            "INSERT INTO leaf_titles(source, leaf, title, rank, file_id) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(source, leaf) DO UPDATE SET title = excluded.title, rank = excluded.rank, "
            "file_id = excluded.file_id", (source, ev.leaf, title, ev.rank, file_id))
        self._leaves = True
        folder = self._folder(file_id)
        row = self.conn.execute(
            "SELECT m.session FROM messages m JOIN sessions s ON s.id = m.session JOIN files f ON f.id = m.file_id "
            "WHERE m.message_id = ? AND s.source = ? AND substr(f.path, 1, ?) = ? ORDER BY m.id LIMIT 1",
            (ev.leaf, source, len(folder), folder)).fetchone()
        if row is not None:
            self._title(row[0], title, ev.rank)

    def _leaf_of(self, source: str, session: int, message_id: str, file_id: int) -> None:
        """A new message that a waiting title names: its session takes it."""
        if self._leaves is None:
            self._leaves = self.conn.execute("SELECT 1 FROM leaf_titles LIMIT 1").fetchone() is not None
        if not self._leaves:
            return
        row = self.conn.execute("SELECT title, rank, file_id FROM leaf_titles WHERE source = ? AND leaf = ?",
                                (source, message_id)).fetchone()
        if row is not None and row[2] is not None and self._path(file_id).startswith(self._folder(row[2])):
            self._title(session, row[0], row[1])

    def _path(self, file_id: int) -> str:
        return one(self.conn.execute("SELECT path FROM files WHERE id = ?", (file_id,)))[0]

    def _folder(self, file_id: int) -> str:
        """The folder of a log, as a prefix of the paths of the logs in it and
        below it. A title by leaf (a Claude Code `summary`) names a message of
        a log in its own project folder (`<root>/<project>/`, sub-agents
        below it), never of another project's: a log in one folder must not
        title, or be seen through, a session of another (docs/formats.md)."""
        return os.path.dirname(self._path(file_id)) + os.sep

    def _prompt(self, session: int, text: str) -> None:
        """The first prompt of a session names it while it has no title."""
        if session in self._prompted or not is_prompt(text):
            return
        self._prompted.add(session)
        self.conn.execute("UPDATE sessions SET prompt = ? WHERE id = ? AND prompt IS NULL",
                          (prompt_title(text), session))

    def _forget(self, source: str, file_id: int, ev: ForgetEvent) -> None:
        """A rewind: the messages this log took back leave the index (their
        bytes are wiped at the end of the pass, like any deleted message's)."""
        session = self.session_row(source, ev.cwd, ev.session_id)
        for mid in ev.message_ids:
            # `mid` itself, and `mid#...` (ids from `#` up to `$`, the next character).
            rows = list(self.conn.execute(
                "SELECT id, message_id FROM messages WHERE session = ?1 AND file_id = ?2 "
                "AND (message_id = ?3 OR (message_id > ?3 || '#' AND message_id < ?3 || '$') "
                "OR message_id = ?3 || '#')",
                (session, file_id, mid)))
            for rowid, message_id in rows:
                self._reindex(rowid, None)
                self.conn.execute("DELETE FROM messages WHERE id = ?", (rowid,))
                self.held.pop((session, message_id), None)
                self.counts["messages_forgotten"] += 1

    def _message(self, source: str, file_id: int, ev: MessageEvent) -> None:
        session = self.session_row(source, ev.cwd, ev.session_id)
        if ev.settled and not ev.text and not ev.attachments:
            # Settled with nothing to search: it replaces its deltas, if any,
            # with nothing, so the message is not (or no longer) searchable.
            self.skips["empty"] += 1
            # (A record written again whole with nothing left replaces its
            # earlier copy from the same log, settled or not.)
            gone = self.conn.execute(
                "SELECT id FROM messages WHERE session = ? AND message_id = ? AND (settled = 0 OR (? AND file_id = ?))",
                (session, ev.message_id, int(ev.replaces), file_id)).fetchone()
            if gone:
                self._reindex(gone[0], None)
                self.conn.execute("DELETE FROM messages WHERE id = ?", gone)
            return
        prep = ev.prepared or prepare(ev, self.redactor)
        text, atts, names, body, nfkc, ntok = (prep.text, prep.attachments, prep.names, prep.body, prep.nfkc,
                                               prep.ntok)
        key = (session, ev.message_id)
        held = None
        if ev.settled:
            self.held.pop(key, None)
        else:  # the first fragment of a stream, unless the row exists (below)
            streamed, _, held = self.redactor.stream("", ev.text, None)
            if held is not None:
                text, (body, nfkc, ntok) = streamed, fts_body(streamed, names)
        # Most messages are new: insert first, and look at the existing row
        # only when there is one (one statement fewer per message on a build).
        # (Not RETURNING: interleaved with FTS5 inserts it made a build 3x
        # slower here; changes() and last_insert_rowid() cost nothing.)
        seq = self._seq(session)
        self.conn.execute(
            "INSERT INTO messages(session, message_id, turn_id, seq, role, ts, text, attachments, settled, file_id, "
            "nfkc, ntok) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(session, message_id) DO NOTHING",
            (session, ev.message_id, ev.turn_id, seq, ev.role, ev.ts, text, atts, int(ev.settled), file_id,
             int(nfkc), ntok),
        )
        if self.conn.changes():
            self._count(session, 1, ntok)
            if held is not None:
                self.held[key] = held
            self.counts["secrets_redacted"] += prep.secrets
            self.counts["messages_added"] += 1
            rowid = self.conn.last_insert_rowid()
            self._new.add(rowid)
            self._bodies[rowid] = body
            if ev.prompt and ev.settled:
                self._prompt(session, text)
            self._leaf_of(source, session, ev.message_id, file_id)
            return
        self._next_seq[session] -= 1  # the seq was not used
        rowid, old_settled, old_text, old_file, old_ntok = one(self.conn.execute(
            "SELECT id, settled, text, file_id, ntok FROM messages WHERE session = ? AND message_id = ?",
            (session, ev.message_id),
        ))
        if ev.settled and old_settled and old_file == file_id:
            if ev.replaces:
                if text == old_text:
                    return  # written again unchanged
            else:
                # The same log settles this message a second time: a settled
                # message is final, so the first text stands, as it does
                # against a late delta.
                self.skips["duplicate_message"] += 1
                return
        n = 0  # secrets the stream's concatenation redacted
        if ev.settled or old_file != file_id:
            # A settled text replaces the deltas. A message read before from
            # another file, one that is gone or was replaced (a log compressed
            # in place, say), is delivered again from its first delta by this
            # file, so its stream starts over here instead of being appended
            # to itself.
            self.counts["secrets_redacted"] += prep.secrets
            self.held.pop(key, None)
            if held is not None:
                self.held[key] = held
        elif old_settled:
            self.skips["delta_after_settle"] += 1
            return
        else:
            text, n, held = self.redactor.stream(old_text, ev.text, self.held.pop(key, None))
            if held is not None:
                self.held[key] = held
            self.counts["secrets_redacted"] += n
            if atts is None:  # a delta carries no attachments of its own; keep the earlier ones
                prev = one(self.conn.execute("SELECT attachments FROM messages WHERE id = ?", (rowid,)))[0]
                atts = prev
                names = [a["name"] for a in orjson.loads(prev)] if prev else []
            body, nfkc, ntok = fts_body(text, names)
        if (prep.secrets or n) and not text.startswith(old_text.removesuffix(PENDING)):
            # A secret completed by this text took back what was stored of it
            # (an e-mail's local part before its `@`, say): those old tokens
            # stay in FTS5's segments, and the old row in freed space, until
            # the end of the pass wipes them (Store.wipe; migration m007).
            self.conn.execute("INSERT INTO wipe_pending(what, n) VALUES ('messages', 1) "
                              "ON CONFLICT(what) DO UPDATE SET n = n + 1")
        self.conn.execute(
            "UPDATE messages SET turn_id = ?, role = ?, ts = ?, text = ?, attachments = ?, settled = ?, file_id = ?, "
            "nfkc = ?, ntok = ? WHERE id = ?",
            (ev.turn_id, ev.role, ev.ts, text, atts, int(ev.settled), file_id, int(nfkc), ntok, rowid),
        )
        self._count(session, 0, ntok - old_ntok)
        self.counts["messages_updated"] += 1
        self._reindex(rowid, body)
        if ev.prompt and ev.settled:  # a prompt that streamed settles
            self._prompt(session, text)

    def _seq(self, session: int) -> int:
        nxt = self._next_seq.get(session)
        if nxt is None:
            nxt = one(self.conn.execute("SELECT coalesce(max(seq), 0) + 1 FROM messages WHERE session = ?", (session,)))[0]
        self._next_seq[session] = nxt + 1
        return nxt
