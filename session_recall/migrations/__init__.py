"""Numbered migrations, applied in order on every open.

Each migration is a function `mNNN_name(conn)` marked `@migration`, which
registers it in MIGRATIONS (in number order) and returns it; a test checks that
every `mNNN_` function of this module is registered, and the schema version is
the highest number applied. The runner records each by name in `_migrations`, inside the same transaction as its
changes, so a crash mid-migration leaves it either applied and recorded or not
at all; an open that finds a migration unrecorded simply applies it again.
The FTS5 schema is created here and nowhere else (the rebuild after a tokenizer
or redactor change recreates it through `recreate_fts`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from typing import cast

import apsw

from ..paths import recorded
from ..text.tokens import FTS_TOKENIZE

MIGRATIONS: list[Callable[[apsw.Connection], None]] = []


def migration(fn: Callable[[apsw.Connection], None]) -> Callable[[apsw.Connection], None]:
    """Register `fn` (named mNNN_what) as migration NNN."""
    number = _number(fn.__name__)
    if any(_number(f.__name__) == number for f in MIGRATIONS):
        raise ValueError(f"two migrations numbered {number}: {fn.__name__}")
    MIGRATIONS.append(fn)
    MIGRATIONS.sort(key=lambda f: _number(f.__name__))
    return fn


def _number(name: str) -> int:
    if not (len(name) > 5 and name[0] == "m" and name[1:4].isdigit() and name[4] == "_"):
        raise ValueError(f"a migration is named mNNN_what, not {name!r}")
    return int(name[1:4])


def create_fts(conn: apsw.Connection) -> None:
    # Contentless with delete support: the text lives once, in `messages`;
    # FTS5 keeps only the inverted index of the bigram-rewritten body
    # (docs/storage.md has the measurements behind this choice).
    # prefix='1': an index of every token's first character. A one-character
    # CJK term is the prefix query `"年"*` (text/tokens.py), which without it
    # merges the row lists of every token that begins with that character
    # (4,164 tokens for `是` at 1 GB: 200 ms at 250 MB, seconds at 1 GB,
    # whatever the LIMIT); with it, one row list. It costs 28-49 % more FTS5
    # table and 30-48 % more FTS5 insert time (docs/benchmarks.md, "What each
    # lever bought"). A table made before it gets it from m011.
    conn.execute(
        "CREATE VIRTUAL TABLE message_fts USING fts5("
        f"body, content='', contentless_delete=1, prefix='1', tokenize=\"{FTS_TOKENIZE}\")"
    )
    tune_fts(conn)


def recreate_fts(conn: apsw.Connection) -> None:
    """An empty FTS5 table in place of the old one (the rebuild after a
    tokenizer or redactor change refills it)."""
    conn.execute("DROP TABLE IF EXISTS message_fts")
    create_fts(conn)


# FTS5 keeps these in its own config table, so they hold for every later
# connection. A bigger hash table (the default is 1 MB) flushes fewer, larger
# level-0 segments during a bulk build, so there is less to merge later; its
# memory is freed at each commit. docs/benchmarks.md has the measurement.
FTS_SETTINGS = {"hashsize": 16 << 20}


def tune_fts(conn: apsw.Connection) -> None:
    for key, value in FTS_SETTINGS.items():
        conn.execute("INSERT INTO message_fts(message_fts, rank) VALUES (?, ?)", (key, value))


@migration
def m001_initial(conn: apsw.Connection) -> None:
    conn.execute(
        """
        CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE sources(
            id INTEGER PRIMARY KEY,
            path TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL,
            added_at TEXT NOT NULL,
            last_indexed_at TEXT
        );
        CREATE TABLE files(
            id INTEGER PRIMARY KEY,
            path TEXT NOT NULL UNIQUE,
            source_id INTEGER NOT NULL REFERENCES sources(id),
            kind TEXT NOT NULL,
            dev INTEGER, ino INTEGER,
            size INTEGER NOT NULL DEFAULT -1,     -- st_size when last read to the end
            mtime_ns INTEGER NOT NULL DEFAULT -1,
            offset INTEGER NOT NULL DEFAULT 0,    -- bytes consumed (decompressed, for .zst)
            prefix_hash TEXT,                     -- plain: sample of the consumed prefix; .zst: of the file
            state TEXT,                           -- the parser's context (JSON) at `offset`
            missing INTEGER NOT NULL DEFAULT 0,
            indexed_at TEXT
        );
        CREATE TABLE file_skips(
            file_id INTEGER NOT NULL,
            reason TEXT NOT NULL,
            count INTEGER NOT NULL,
            PRIMARY KEY(file_id, reason)
        ) WITHOUT ROWID;
        CREATE TABLE sessions(
            id INTEGER PRIMARY KEY,
            source TEXT NOT NULL,
            cwd TEXT NOT NULL,
            session_id TEXT NOT NULL,
            title TEXT,
            started_at TEXT,
            updated_at TEXT,
            UNIQUE(source, cwd, session_id)
        );
        CREATE INDEX sessions_cwd ON sessions(cwd);
        CREATE TABLE messages(
            id INTEGER PRIMARY KEY,
            session INTEGER NOT NULL REFERENCES sessions(id),
            message_id TEXT NOT NULL,
            turn_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            role TEXT NOT NULL,
            ts TEXT,
            text TEXT NOT NULL,                   -- projected, redacted, not folded
            attachments TEXT,                     -- JSON list, names redacted
            settled INTEGER NOT NULL,
            file_id INTEGER,
            UNIQUE(session, message_id)
        );
        CREATE INDEX messages_turn ON messages(session, turn_id, seq);
        CREATE INDEX messages_file ON messages(file_id);
        """
    )
    create_fts(conn)


@migration
def m002_source_problems(conn: apsw.Connection) -> None:
    # What the last full pass over a source found wrong outside the lines of a
    # log: an empty file, a file of unknown kind, a corrupt .zst, a folder it
    # could not read, a symlink loop. Each pass replaces its source's rows, so
    # they describe the source as it is now; `status` adds them to the counts
    # of skipped lines (file_skips), which accumulate as lines are read.
    conn.execute(
        """
        CREATE TABLE source_problems(
            source_id INTEGER NOT NULL,
            reason TEXT NOT NULL,
            count INTEGER NOT NULL,
            PRIMARY KEY(source_id, reason)
        ) WITHOUT ROWID
        """
    )


@migration
def m003_text_form(conn: apsw.Connection) -> None:
    # 1 when a message's stored text is in NFKC already (as most is): recall
    # then folds it with casefold() alone, skipping the normalization that
    # cost most of a query's verification. 0 (rows written before this
    # migration, or text that NFKC changes) folds it in full.
    conn.execute("ALTER TABLE messages ADD COLUMN nfkc INTEGER NOT NULL DEFAULT 0")


@migration
def m004_fts_settings(conn: apsw.Connection) -> None:
    tune_fts(conn)


@migration
def m005_query_indexes(conn: apsw.Connection) -> None:
    # Two indexes for recall (query/retrieve.py), about 3 % of the file together.
    # messages_rank: what the FTS5 query reads of each match to rank it
    # (`Retriever.fts`), a dense copy, so that scoring a common term's tens of
    # thousands of matches reads a few MB of index instead of one page of the
    # wide `messages` table per match.
    # messages_recency: a session's newest message time by one seek, for the
    # scans' most-recent-first order of sessions (`Retriever.scan`), which otherwise
    # reads every message of every session.
    conn.execute("CREATE INDEX IF NOT EXISTS messages_rank ON messages(id, session, role, ts, turn_id)")
    conn.execute("CREATE INDEX IF NOT EXISTS messages_recency ON messages(session, ts)")


def _varints(blob: bytes | None) -> int:
    """The sum of the SQLite varints in `blob` (an FTS5 docsize record: the
    tokens of each column)."""
    total = value = 0
    for byte in blob or b"":
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            total, value = total + value, 0
    return total


@migration
def m006_scope_statistics(conn: apsw.Connection) -> None:
    # The statistics of a confined caller's scope (query/rank.py): how many
    # messages and index tokens each session holds, kept by triggers as
    # messages come and go, so a scope's totals are a sum over its sessions.
    # messages.ntok is written with each message (indexer.ingest.fts_body);
    # rows of before come from FTS5's own record of their length.
    conn.execute("""
        ALTER TABLE messages ADD COLUMN ntok INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE sessions ADD COLUMN n_messages INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE sessions ADD COLUMN n_tokens INTEGER NOT NULL DEFAULT 0;
    """)
    # apsw's stubs type a scalar function as variadic over every SQLite value
    conn.create_scalar_function("recall_varints", _varints, 1, deterministic=True)  # type: ignore[arg-type]
    conn.execute("""
        UPDATE messages SET ntok = coalesce(
            (SELECT recall_varints(sz) FROM message_fts_docsize WHERE id = messages.id), 0);
        UPDATE sessions SET
            n_messages = (SELECT count(*) FROM messages WHERE session = sessions.id),
            n_tokens = (SELECT coalesce(sum(ntok), 0) FROM messages WHERE session = sessions.id);
        CREATE TRIGGER messages_stats_insert AFTER INSERT ON messages BEGIN
            UPDATE sessions SET n_messages = n_messages + 1, n_tokens = n_tokens + new.ntok WHERE id = new.session;
        END;
        CREATE TRIGGER messages_stats_delete AFTER DELETE ON messages BEGIN
            UPDATE sessions SET n_messages = n_messages - 1, n_tokens = n_tokens - old.ntok WHERE id = old.session;
        END;
        CREATE TRIGGER messages_stats_update AFTER UPDATE OF ntok, session ON messages BEGIN
            UPDATE sessions SET n_messages = n_messages - 1, n_tokens = n_tokens - old.ntok WHERE id = old.session;
            UPDATE sessions SET n_messages = n_messages + 1, n_tokens = n_tokens + new.ntok WHERE id = new.session;
        END;
    """)


@migration
def m007_wipe_pending(conn: apsw.Connection) -> None:
    # "Deleted means gone" (docs/storage.md, "Deleting leaves no bytes
    # behind"): what the next end of a sync pass owes (Store.wipe). Every
    # message deleted, by whatever path, counts itself into the row
    # 'messages' in the transaction that deletes it, so a crash between the
    # delete and the wipe still leaves the wipe owed. 'vacuum' is owed after
    # a rebuild, and by a database written before this migration, whose freed
    # pages SQLite did not zero (secure_delete was off).
    conn.execute("CREATE TABLE wipe_pending(what TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID")
    conn.execute(
        "CREATE TRIGGER messages_wipe_pending AFTER DELETE ON messages BEGIN "
        "INSERT INTO wipe_pending(what, n) VALUES ('messages', 1) "
        "ON CONFLICT(what) DO UPDATE SET n = n + 1; END"
    )
    if conn.execute("SELECT 1 FROM messages LIMIT 1").fetchone():
        conn.execute("INSERT INTO wipe_pending(what, n) VALUES ('vacuum', 1)")


@migration
def m008_normalise_cwds(conn: apsw.Connection) -> None:
    # Recorded cwds are normalised once, at ingest, and compared as stored
    # (docs/recall.md, gates): rows written before that are normalised here,
    # lexically, never through symlinks. Two rows of one session that differ
    # only in spelling (`/a/b/` and `/a/b`) become one: the row spelled in
    # normal form keeps the messages of both (a message id it has already
    # wins; the other's copy leaves the FTS index too), the earliest start
    # and a title.
    rows = conn.execute("SELECT id, source, cwd, session_id FROM sessions ORDER BY id").fetchall()
    for row, source, cwd, session_id in rows:
        norm = recorded(cast(str, cwd))  # sessions.cwd is TEXT NOT NULL
        if norm == cwd:
            continue
        twin = conn.execute("SELECT id FROM sessions WHERE source = ? AND cwd = ? AND session_id = ?",
                            (source, norm, session_id)).fetchone()
        if twin is None:
            conn.execute("UPDATE sessions SET cwd = ? WHERE id = ?", (norm, row))
            continue
        (keep,) = twin
        conn.execute("UPDATE messages SET session = ?1 WHERE session = ?2 AND message_id NOT IN "
                     "(SELECT message_id FROM messages WHERE session = ?1)", (keep, row))
        for (gone,) in conn.execute("SELECT id FROM messages WHERE session = ?", (row,)).fetchall():
            conn.execute("DELETE FROM message_fts WHERE rowid = ?", (gone,))
            conn.execute("DELETE FROM messages WHERE id = ?", (gone,))
        conn.execute(
            "UPDATE sessions SET started_at = (SELECT min(coalesce(a.started_at, b.started_at), "
            "coalesce(b.started_at, a.started_at)) FROM sessions a, sessions b WHERE a.id = ?1 AND b.id = ?2), "
            "title = coalesce(title, (SELECT title FROM sessions WHERE id = ?2)) WHERE id = ?1", (keep, row))
        conn.execute("DELETE FROM sessions WHERE id = ?", (row,))
    # The gates look sessions up by id (a session_id argument, and the twins
    # of sessions in a denied folder: query/retrieve.py `Retriever.denied_twins`).
    conn.execute("CREATE INDEX IF NOT EXISTS sessions_session_id ON sessions(session_id)")


@migration
def m009_titles(conn: apsw.Connection) -> None:
    # Titles that are right (docs/formats.md, "Titles"): the rank of the
    # title a session has, so a lower-ranked one read later from another log
    # does not replace it; the first prompt a person typed, which names an
    # untitled session (shown as its title, never ranked as one); titles
    # that wait for the message their session is known by (a Claude Code
    # summary names its session by a message id, `leafUuid`), with the log
    # that said so (its rows go with the log, on a prune or a rebuild); and
    # messages found by their id alone, to resolve such a title when that
    # message was indexed first.
    conn.execute("""
        ALTER TABLE sessions ADD COLUMN title_rank INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE sessions ADD COLUMN prompt TEXT;
        CREATE TABLE leaf_titles(
            source TEXT NOT NULL,
            leaf TEXT NOT NULL,
            title TEXT NOT NULL,
            rank INTEGER NOT NULL,
            file_id INTEGER,
            PRIMARY KEY(source, leaf)
        ) WITHOUT ROWID;
        CREATE INDEX messages_message_id ON messages(message_id);
    """)


@migration
def m010_session_totals_by_the_writer(conn: apsw.Connection) -> None:
    # The per-session totals of m006 are kept by the indexer's Writer
    # (indexer/ingest.py), a batch at a time, instead of by triggers on
    # insert and update: an INSERT that fires a trigger runs with a statement
    # journal (SQLite must be able to undo that statement alone), so every
    # message written copied each page it touched (its row's, its overflow
    # pages, six index pages) to the journal first. That was more than half
    # of the writer's time in SQLite (docs/benchmarks.md, "What each lever
    # bought"). Deletes, which take many paths and are rare, keep theirs.
    conn.execute("DROP TRIGGER IF EXISTS messages_stats_insert")
    conn.execute("DROP TRIGGER IF EXISTS messages_stats_update")



@migration
def m011_one_character_prefix_index(conn: apsw.Connection) -> None:
    # The FTS5 table gains its one-character prefix index (create_fts). FTS5
    # cannot add one to a table, so a table made before it is made again and
    # refilled from the stored rows: the same bodies (fts_body of each
    # message's stored text and attachment names), so the same tokens, row
    # ids and scores. One transaction, like every migration: readers keep
    # the old table until it commits. It costs an FTS5 insert of every body
    # (about four minutes at 1 GB of history on a small machine), once.
    (sql,) = cast(tuple, conn.execute("SELECT sql FROM sqlite_master WHERE name = 'message_fts'").fetchone())
    if "prefix=" in sql:
        return  # made by create_fts already (a new index)
    from ..indexer.ingest import stored_body  # the indexer builds on this package

    recreate_fts(conn)
    rows = conn.execute("SELECT id, text, attachments FROM messages ORDER BY id")
    conn.executemany("INSERT INTO message_fts(rowid, body) VALUES (?, ?)",
                     ((rowid, stored_body(text, atts)) for rowid, text, atts in rows))
    conn.execute("INSERT INTO message_fts(message_fts) VALUES ('optimize')")


@migration
def m012_cwds_through_links(conn: apsw.Connection) -> None:
    # A session's recorded cwd through the symlinks that existed when it was
    # indexed (`cwd_links`; NULL when that is the cwd itself, or the cwd is
    # not absolute). The allow- and denylists test both spellings, so a
    # session recorded through a link into a denied folder is denied
    # (docs/recall.md). Sessions indexed before get their cwd resolved
    # through the links of the day this migration runs, once.
    from .. import paths  # (the migrations stand below the rest of the package)

    conn.execute("ALTER TABLE sessions ADD COLUMN cwd_links TEXT")
    for (cwd,) in list(conn.execute("SELECT DISTINCT cwd FROM sessions")):
        links = paths.through_links(cwd)
        if links is not None:
            conn.execute("UPDATE sessions SET cwd_links = ? WHERE cwd = ?", (links, cwd))


def applied(conn: apsw.Connection) -> list[str]:
    conn.execute("CREATE TABLE IF NOT EXISTS _migrations(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    return [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY name")]


def apply(conn: apsw.Connection, upto: int | None = None) -> list[str]:
    """Apply every migration not yet recorded (the first `upto` only, for tests)."""
    done: list[str] = []
    for fn in MIGRATIONS[:upto]:
        name = fn.__name__
        if name in applied(conn):
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have applied it while we waited for the lock.
            if conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone() is None:
                fn(conn)
                conn.execute(
                    "INSERT INTO _migrations(name, applied_at) VALUES (?, ?)",
                    (name, _dt.datetime.now(_dt.timezone.utc).isoformat()),
                )
                done.append(name)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return done


def schema_version(conn: apsw.Connection) -> int:
    """The highest migration number applied (0 for a new file)."""
    return max((_number(name) for name in applied(conn)), default=0)
