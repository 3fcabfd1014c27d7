"""The planted-secret corpus (contract section 6, redaction): an outside
check of the redactor, built from public scanners' rules, not from its
patterns.

tests/planted.py writes Claude Code, Codex and canonical logs holding a
fresh random secret of every kind of tests/planted_kinds.py, in every
syntax of the kind and in every field of every format (text, tool-call
arguments, tool results, titles, attachment names, streamed deltas split
through the secret, and fields that are never indexed: thinking, injected
text, noise). The corpus is indexed with `recall index`; then:

- no 12-character piece of any planted secret (as written or case-folded)
  is in the bytes of the database, its -wal or its -shm file, after
  indexing and after `recall doctor --repair` (the CLI has no `optimize`
  command, so there is no such stage);
- no piece is in the JSON output of `recall search`, in mask and hash
  mode, for queries of the words around the secrets (each kind's own word,
  and the keys, headers and commands they sit in), every page of them;
- every secret-shaped query is refused: the value as written, its first 12
  characters when they already hold part of the secret (a token with its
  prefix), and `KEY=value` for a value that has no shape of its own;
- obvious placeholders stay readable and searchable.

A failure prints a table (kind, format, field, syntax, where found) for the
redactor's maintainers; the whole report is also written to the file named
by RECALL_PLANTED_REPORT when it is set.

CI runs the CI set of kinds (`python -m pytest tests/test_planted_secrets.py`);
the long form runs them all (`RECALL_PLANTED_FULL=1`). RECALL_PLANTED_SEED
draws other values.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import recall_command
from planted import PLACEHOLDER_WORD, SEED, build
from planted_kinds import BY_NAME, PLACEHOLDER_PIECES

FULL = os.environ.get("RECALL_PLANTED_FULL", "") not in ("", "0")
PLANTED_SEED = int(os.environ.get("RECALL_PLANTED_SEED", SEED))
WINDOW = 12  # a piece of a secret this long found anywhere is a leak
PAGES = 40 if FULL else 1  # at most this many pages of one query

# Words around the secrets that a person would search for.
SURROUNDING = ["rotate", "step", "value", "export", "Authorization", "Bearer", "curl", "token", "password",
               "api_key", "secret", "mysql", "sshpass", "docker login", "machine", "PRIVATE KEY", "BEGIN",
               "client-key-data", "AccountKey", "sig", "postgres", "mongodb", "redis", "jdbc", "hooks",
               "https", "deploy", "auths", "attached", "txt", "arguments", "Add File", "the value is"]


# --- finding pieces of secrets in bytes ------------------------------------------------------


class Needles:
    """Every WINDOW-character piece of every planted secret, case-folded
    (FTS5 stores folded tokens; the secrets are ASCII, so folding is
    lower-casing), mapped to the plants it belongs to."""

    _RUN = re.compile(rb"[^\s\"\\]{%d,}" % WINDOW)  # secrets hold no blank, quote or backslash

    def __init__(self, plants: list[dict]):
        self.windows: dict[bytes, list[int]] = defaultdict(list)
        for p in plants:
            s = p["secret"].lower().encode()
            pieces = {s[i : i + WINDOW] for i in range(len(s) - WINDOW + 1)}
            if not self._RUN.fullmatch(s):  # pieces across a line break: their lines' own pieces stand for them
                pieces = {w for w in pieces if self._RUN.fullmatch(w)}
            assert pieces, f"secret of plant {p['id']} has no piece to look for"
            for w in pieces:
                self.windows[w].append(p["id"])

    def scan(self, blob: bytes) -> set[int]:
        """Ids of the plants a piece of which is in `blob`."""
        seen: set[bytes] = set()
        for m in self._RUN.finditer(blob.lower()):
            run = m.group()
            seen.update(run[i : i + WINDOW] for i in range(len(run) - WINDOW + 1))
        windows = self.windows
        return {pid for w in seen if w in windows for pid in windows[w]}


def strings_of(value) -> list[str]:
    """Every string in a decoded JSON value (texts come back unescaped)."""
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return out


# --- running the CLI -----------------------------------------------------------------------------

# Runs many `recall` command lines in one process: each is the CLI's own
# command (click parses the flags, the command calls the API and prints), so
# that hundreds of searches do not each pay for an interpreter start.
_DRIVER = r"""
import contextlib, io, json, sys
from session_recall.cli import main
out = []
for argv in json.load(sys.stdin):
    buf, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        try:
            main.main(args=argv, prog_name="recall", standalone_mode=False)
        except SystemExit as e:
            code = e.code or 0
        except Exception as e:
            code, _ = 1, err.write(repr(e))
    out.append({"argv": argv, "code": code, "stdout": buf.getvalue(), "stderr": err.getvalue()})
sys.stdout.write(json.dumps(out))
"""


class Recall:
    def __init__(self, root: Path, db: str = "recall.db"):
        self.root = root
        self.db = root / db
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RECALL_")}
        self.env.update(XDG_DATA_HOME=str(root / "xdg-data"), XDG_CONFIG_HOME=str(root / "xdg-config"))
        self.configs = {}
        for mode in ("mask", "hash"):
            cfg = root / f"config-{mode}.toml"
            cfg.write_text(f'redaction = "{mode}"\nmax_limit = 500\n')
            self.configs[mode] = cfg

    def run(self, *args: str, mode: str = "mask", timeout: float = 300) -> subprocess.CompletedProcess:
        env = {**self.env, "RECALL_CONFIG": str(self.configs[mode])}
        return subprocess.run([*recall_command(), "--db", str(self.db), *args], capture_output=True, text=True,
                              timeout=timeout, check=False, cwd=self.root, env=env)

    def many(self, argvs: list[list[str]], mode: str = "mask") -> list[dict]:
        env = {**self.env, "RECALL_CONFIG": str(self.configs[mode])}
        full = [["--db", str(self.db), *a] for a in argvs]
        done = subprocess.run([sys.executable, "-c", _DRIVER], input=json.dumps(full), capture_output=True,
                              text=True, timeout=600, check=False, cwd=self.root, env=env)
        assert done.returncode == 0, done.stderr[-4000:]
        return json.loads(done.stdout)

    def files(self) -> dict[str, bytes]:
        out = {}
        for suffix in ("", "-wal", "-shm"):
            p = Path(f"{self.db}{suffix}")
            if p.exists():
                out[p.name] = p.read_bytes()
        return out


def search_argv(query: str, cursor: str | None = None) -> list[str]:
    argv = ["search", "--json", "--all-projects", "--limit", "500"]
    if cursor:
        argv += ["--cursor", cursor]
    return [*argv, "--", query]


# --- the run: build, index, look --------------------------------------------------------------


class Run:
    """Everything the tests assert on, computed once."""

    def __init__(self, root: Path):
        self.corpus = root / "corpus"
        self.manifest = build(self.corpus, full=FULL, seed=PLANTED_SEED)
        self.plants = self.manifest["plants"]
        self.recall = Recall(root)
        # where each plant was found: plant id -> set of places
        self.found: dict[int, set[str]] = defaultdict(set)
        self.notes: list[str] = []
        self.scanned: dict[str, tuple[bytes, set[int]]] = {}

        srcs = [str(self.corpus / d) for d in ("claude-code", "codex", "canonical")]
        with ThreadPoolExecutor(1) as pool:  # the needles are cut while `recall index` runs
            indexing = pool.submit(self.recall.run, "index", "--json", *srcs)
            self.needles = Needles(self.plants)
            done = indexing.result()
        assert done.returncode == 0, done.stderr
        self.index_report = json.loads(done.stdout)
        self.look_at_files("index")

        done = self.recall.run("doctor", "--repair", "--json")
        self.doctor = done
        self.look_at_files("doctor --repair")

        self.stream_in_stages(root)

        # the refusals and the placeholders ride with the first batch of searches
        pairs = self.refusal_queries()
        placeholder_queries = [PLACEHOLDER_WORD, "your-api-key-here", "YOUR_TOKEN_HERE", "xxxxxxxx"]
        extra = [["search", "--json", "--all-projects", "--", q] for _, q in pairs]
        extra += [search_argv(q) for q in placeholder_queries]
        self.outputs: list[dict] = []
        extra_results = self.search_everything(extra)
        self.refusals = self.refuse_everything(pairs, extra_results[: len(pairs)])
        self.placeholder_results = extra_results[len(pairs):]

    def stream_in_stages(self, root: Path) -> None:
        """The canonical logs again, into a database of their own, appended
        in stages with a `recall index` after each (as the watcher reads a
        log being written): each stage ends inside the streams, so a
        secret's head is read a sync before its tail."""
        stages = 6 if FULL else 2
        logs = root / "streamed"
        logs.mkdir()
        recall = Recall(root, "streamed.db")
        # only the session lines and the streams: the rest was read above
        files = {f.name: [ln for ln in f.read_bytes().splitlines(keepends=True)
                          if b'"type": "session"' in ln or b'"message_id": "delta_' in ln]
                 for f in sorted((self.corpus / "canonical").glob("*.jsonl"))}
        for k in range(1, stages + 1):
            for name, lines in files.items():
                deltas = [i for i, ln in enumerate(lines) if b'"message_delta"' in ln]
                cut = len(lines) if k == stages or not deltas else deltas[len(deltas) * k // stages]
                (logs / name).write_bytes(b"".join(lines[:cut]))
            done = recall.run("index", "--kind", "canonical", str(logs))
            assert done.returncode == 0, done.stderr
            self.look_at_files(f"streamed, sync {k}/{stages}", recall)

    def look_at_files(self, stage: str, recall: Recall | None = None, label: str = "db") -> None:
        for name, blob in (recall or self.recall).files().items():
            digest = hashlib.blake2b(blob).digest()
            if name in self.scanned and self.scanned[name][0] == digest:
                hits = self.scanned[name][1]  # the same bytes as at the stage before
            else:
                hits = self.needles.scan(blob)
                self.scanned[name] = (digest, hits)
            for pid in hits:
                suffix = name.rsplit(".db", 1)[1]
                self.found[pid].add(f"{label}{suffix} ({stage})")

    def search_everything(self, extra: list[list[str]]) -> list[dict]:
        """Every page of every query of the surrounding words, mask and hash;
        the answers of `extra` (mask mode) are returned."""
        extra_results: list[dict] = []
        queries = [k["marker"] for k in self.manifest["kinds"]] + SURROUNDING
        keys = sorted({BY_NAME[k["name"]].key.lower() for k in self.manifest["kinds"]})
        queries += keys
        texts: dict[str, set[str]] = defaultdict(set)
        for mode in ("mask", "hash"):
            # each kind's word finds all of its messages in one page; the other
            # words overlap them, and page on only in the long form
            pending = [(q, None) for q in (queries if mode == "mask" or FULL else queries[: len(self.manifest["kinds"])])]
            for _ in range(PAGES):
                if not pending:
                    break
                argvs = [search_argv(q, c) for q, c in pending]
                if mode == "mask" and not extra_results:
                    results = self.recall.many(argvs + extra, mode=mode)
                    results, extra_results = results[: len(argvs)], results[len(argvs):]
                else:
                    results = self.recall.many(argvs, mode=mode)
                nxt = []
                for (q, _c), res in zip(pending, results):
                    self.outputs.append({"mode": mode, "query": q, **res})
                    where = f"search {mode} {q!r}"
                    try:
                        env = json.loads(res["stdout"])
                    except ValueError:
                        self.notes.append(f"{where}: no JSON envelope: {res['stderr'][-300:]}")
                        texts[res["stdout"] + res["stderr"]].add(where)
                        continue
                    # the texts as a caller reads them (unescaped); each distinct one is scanned once
                    for t in strings_of(env):
                        texts[t].add(where)
                    texts[res["stderr"]].add(where)
                    if env.get("next_cursor"):
                        nxt.append((q, env["next_cursor"]))
                pending = nxt
        for t, wheres in texts.items():
            for pid in self.needles.scan(t.encode()):
                self.found[pid] |= wheres
        return extra_results

    def refusal_queries(self) -> list[tuple[dict, str]]:
        """(plant, query): one plant of each kind, by its first syntax."""
        out = []
        seen = set()
        for p in self.plants:
            if p["kind"] in seen or p["format"] != "canonical":
                continue
            seen.add(p["kind"])
            kind = BY_NAME[p["kind"]]
            if kind.shaped:
                out.append((p, p["value"]))
                if p["value"].find(p["secret"]) <= WINDOW - 4:  # the head already holds part of the secret
                    out.append((p, p["value"][:WINDOW]))
            else:
                out.append((p, f"{kind.key}={p['value']}"))
        return out

    def refuse_everything(self, pairs: list[tuple[dict, str]], results: list[dict]) -> list[tuple[dict, str, dict]]:
        out = []
        for (p, q), res in zip(pairs, results):
            out.append((p, q, res))
        # and one through the installed command itself, to show the driver answers as it does
        p, q = pairs[0]
        done = self.recall.run("search", "--json", "--all-projects", "--", q)
        out.append((p, q, {"argv": ["recall", "search", q], "code": done.returncode, "stdout": done.stdout,
                           "stderr": done.stderr}))
        return out

    # --- reports -------------------------------------------------------------------------

    @staticmethod
    def places(where: set[str]) -> str:
        """`db (index), db-wal (index); search mask: 'a', 'b'`."""
        files = sorted(w for w in where if not w.startswith("search "))
        queries: dict[str, list[str]] = defaultdict(list)
        for w in sorted(where - set(files)):
            _, mode, q = w.split(" ", 2)
            queries[mode].append(q)
        return "; ".join([", ".join(files)] * bool(files)
                         + [f"search {mode}: {', '.join(qs)}" for mode, qs in sorted(queries.items())])

    def table(self, places: dict[int, set[str]], title: str, *, detail: bool = False) -> str:
        """Leaks by kind: a line per kind (how many of its values leak, in
        which formats), then a row per kind, format and field with the
        syntaxes that leak there and where they were found (with `detail`,
        a row per syntax, with an example of the text planted)."""
        total: dict[str, int] = {k["name"]: 0 for k in self.manifest["kinds"]}
        for p in self.plants:
            total[p["kind"]] += 1
        by_kind: dict[str, list[dict]] = defaultdict(list)
        for pid in places:
            by_kind[self.plants[pid]["kind"]].append(self.plants[pid])
        lines = [(f"{title}: {len(by_kind)} of {len(total)} kinds leak "
                 f"({len(places)} of {len(self.plants)} planted values)"),
                 "", "kind | leaked/planted | formats", "---|---|---"]
        for kind in sorted(by_kind):
            fmts = sorted({p["format"] for p in by_kind[kind]})
            lines.append(f"{kind} | {len(by_kind[kind])}/{total[kind]} | {', '.join(fmts)}")
        rows: dict[tuple, list] = defaultdict(lambda: [set(), set(), None])
        for pid, where in places.items():
            p = self.plants[pid]
            key = (p["kind"], p["format"], p["field"]) + ((p["syntax"],) if detail else ())
            rows[key][0].add(p["syntax"])
            rows[key][1] |= where
            rows[key][2] = rows[key][2] or p["text"]
        if detail:
            lines += ["", "kind | format | field | syntax | where found | example", "---|---|---|---|---|---"]
        else:
            lines += ["", "kind | format | field | syntaxes | where found", "---|---|---|---|---"]
        for key, (syntaxes, where, example) in sorted(rows.items()):
            cells = list(key) if detail else [*key, " ".join(sorted(syntaxes))]
            cells.append(self.places(where))
            if detail:
                ex = example.replace("\n", "\\n")
                cells.append(ex if len(ex) <= 90 else ex[:87] + "...")
            lines.append(" | ".join(cells))
        return "\n".join(lines)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Run:
    r = Run(tmp_path_factory.mktemp("planted"))
    report = os.environ.get("RECALL_PLANTED_REPORT")
    if report:
        Path(report).write_text(r.table(r.found, "planted secrets found", detail=True) + "\n")
    return r


def _only(found: dict[int, set[str]], prefix: str) -> dict[int, set[str]]:
    out = {}
    for pid, where in found.items():
        w = {x for x in where if x.startswith(prefix)}
        if w:
            out[pid] = w
    return out


# --- the tests ---------------------------------------------------------------------------------


def test_the_corpus_covers_every_kind_format_and_field(run):
    """Not a vacuous pass: every kind's own word is found in all three
    formats, and every kind is planted in every field of every format."""
    kinds = run.manifest["kinds"]
    assert len(kinds) >= (90 if FULL else 55)
    fields = defaultdict(set)
    for p in run.plants:
        fields[p["format"]].add(p["field"])
    for k in kinds:
        mine = {(p["format"], p["field"]) for p in run.plants if p["kind"] == k["name"]}
        want = {(f, fl) for f, fls in fields.items() for fl in fls}
        assert mine == want, (k["name"], want - mine)
    missing = []
    for out in run.outputs:
        if out["mode"] != "mask" or not out["query"].startswith("mk"):
            continue
        env = json.loads(out["stdout"])
        sources = {r["source"] for r in env["results"]}
        if not {"claude-code", "codex", "canonical"} <= sources:
            missing.append((out["query"], sorted(sources), env.get("status"), env.get("hint")))
    assert not missing, f"kinds whose sessions are not all found by their word: {missing}"
    assert run.index_report["secrets_redacted"] > 0
    assert not run.notes, run.notes


def test_no_planted_secret_is_in_the_database_its_wal_or_its_shm(run):
    found = _only(run.found, "db")
    assert run.doctor.returncode == 0, run.doctor.stdout + run.doctor.stderr
    if found:
        pytest.fail(run.table(found, "planted secrets in the database files"), pytrace=False)


def test_no_planted_secret_is_in_any_search_output(run):
    found = _only(run.found, "search")
    if found:
        pytest.fail(run.table(found, "planted secrets in `recall search --json` output"), pytrace=False)


def test_every_secret_shaped_query_is_refused(run):
    bad = []
    for p, q, res in run.refusals:
        try:
            status = json.loads(res["stdout"]).get("status")
        except ValueError:
            status = f"no envelope ({res['stderr'][-200:]})"
        echoed = bool(run.needles.scan((res["stdout"] + res["stderr"]).encode()) & {p["id"]})
        if status != "refused" or echoed:
            shown = q.replace("\n", "\\n")
            bad.append(f"{p['kind']} | {shown[:70]} | status {status}" + (" | the secret is echoed" if echoed else ""))
    if bad:
        pytest.fail(f"{len(bad)} of {len(run.refusals)} secret-shaped queries not refused:\n"
                    "kind | query | answer\n---|---|---\n" + "\n".join(bad), pytrace=False)


def test_placeholders_stay_readable_and_searchable(run):
    res = run.placeholder_results
    env = json.loads(res[0]["stdout"])
    text = "\n".join(m["text"] for r in env["results"] for m in r["passage"]["messages"])
    assert env["results"], env
    missing = [p for p in PLACEHOLDER_PIECES if p not in text]
    assert not missing, f"placeholders redacted or lost: {missing}\n{text}"
    for r in res[1:]:
        e = json.loads(r["stdout"])
        assert e["status"] != "refused" and e["results"], (r["argv"][-1], e["status"], e["hint"])
