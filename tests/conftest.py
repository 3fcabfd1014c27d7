"""Shared fixtures: a fresh index database in a temporary folder, a folder for
session logs, the one builder of canonical log lines (contract section 2.1)
and a corpus of indexed sessions written with it, and a runner for the
`recall` command in a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from session_recall import Index

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


class CanonicalLog:
    """The one builder of canonical log lines (contract section 2.1) for one
    session, each line as newline-terminated bytes; `Corpus` writes its
    sessions with it.

    Message timestamps tick one second per message from `clock_start`
    (10:00 of the session's day unless given); a message given its own `ts`
    leaves the clock where it was."""

    def __init__(self, session_id: str, cwd: str = "/home/ada/project",
                 started_at: str = "2026-11-20T09:00:00Z", *, clock_start: str = "2026-11-20T10:00:00Z"):
        import datetime as dt

        self.session_id = session_id
        self.cwd = cwd
        self.started_at = started_at
        self._t0 = dt.datetime.fromisoformat(clock_start.replace("Z", "+00:00"))
        self._n = 0

    @staticmethod
    def line(obj: dict) -> bytes:
        return orjson.dumps(obj) + b"\n"

    def next_ts(self) -> str:
        import datetime as dt

        self._n += 1
        t = self._t0 + dt.timedelta(seconds=self._n)
        return t.isoformat().replace("+00:00", "Z")

    def session(self, title: str | None = None) -> bytes:
        obj = {"type": "session", "session_id": self.session_id, "cwd": self.cwd, "started_at": self.started_at}
        if title is not None:
            obj["title"] = title
        return self.line(obj)

    def title(self, title: str) -> bytes:
        return self.line({"type": "title", "session_id": self.session_id, "title": title})

    def message(self, message_id: str, text: str, *, role: str = "user", turn_id: str = "t1", ts: str | None = None,
                **extra) -> bytes:
        """A settled message (`extra`: tool_name, attachments)."""
        return self.line({"type": "message", "session_id": self.session_id, "message_id": message_id,
                          "turn_id": turn_id, "role": role, "ts": ts or self.next_ts(), "text": text, **extra})

    def delta(self, message_id: str, text: str, *, role: str = "assistant", turn_id: str = "t1") -> bytes:
        return self.line({"type": "message_delta", "session_id": self.session_id, "message_id": message_id,
                          "turn_id": turn_id, "role": role, "ts": self.next_ts(), "text": text})

    def noise(self, n: int = 1) -> bytes:
        """`n` progress lines: noise to the index."""
        return b"".join(self.line({"type": "progress", "session_id": self.session_id, "percent": i})
                        for i in range(n))


@pytest.fixture
def canonical():
    """The CanonicalLog class: `canonical("s1").message("m1", "hello")`."""
    return CanonicalLog


@pytest.fixture
def fixture_sessions() -> Path:
    """The small canonical logs shipped in fixtures/sessions."""
    return FIXTURES / "sessions"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "recall.db"


@pytest.fixture
def logs_dir(tmp_path: Path) -> Path:
    """An empty folder to write session logs into (a source)."""
    path = tmp_path / "logs"
    path.mkdir()
    return path


@pytest.fixture
def index(db_path: Path):
    """A fresh index database, closed after the test."""
    ix = Index.open(db_path)
    try:
        yield ix
    finally:
        ix.close()


def recall_command() -> list[str]:
    """The installed `recall` script of this interpreter, else the module."""
    script = shutil.which("recall", path=os.path.dirname(sys.executable))
    return [script] if script else [sys.executable, "-m", "session_recall.cli"]


@pytest.fixture
def recall_cmd() -> list[str]:
    """argv of the `recall` command, for tests that start it with Popen."""
    return recall_command()


@pytest.fixture
def run_recall(tmp_path: Path):
    """Run `recall ARGS...` in a subprocess; returns the CompletedProcess."""

    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != "RECALL_DB"}
        env["XDG_DATA_HOME"] = str(tmp_path / "xdg-data")  # never the user's own index
        return subprocess.run([*recall_command(), *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, cwd=tmp_path, env=env)

    return run


# --- long-running subprocesses (watcher, indexer under kill -9) -----------------


def poll_until(predicate, timeout: float, what: str, interval: float = 0.005):
    """Poll `predicate` until it returns something truthy and return that;
    fail the test with `what` when `timeout` seconds pass first."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


class Proc:
    """A real subprocess whose stdout and stderr go to files, so that a test can
    read what it printed so far without a pipe that could fill up."""

    def __init__(self, argv: list[str], out_dir: Path, name: str, env: dict[str, str], cwd: Path):
        self.argv = argv
        self.out_path = out_dir / f"{name}.stdout"
        self.err_path = out_dir / f"{name}.stderr"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.popen = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=cwd)
        self.pid = self.popen.pid

    def stdout(self) -> str:
        return self.out_path.read_text("utf-8", "replace")

    def stderr(self) -> str:
        return self.err_path.read_text("utf-8", "replace")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def wait_for(self, text: str, *, stream: str = "stderr", timeout: float = 10.0) -> None:
        """Wait until the process printed `text`; fail early if it died first."""
        read = self.stderr if stream == "stderr" else self.stdout

        def printed() -> bool:
            if text in read():
                return True
            if not self.alive():
                raise AssertionError(f"{self.argv} exited with {self.popen.returncode} before printing {text!r}:\n"
                                     f"{self.stderr()}")
            return False

        poll_until(printed, timeout, f"{text!r} from {self.argv}")

    def send(self, sig: int) -> None:
        self.popen.send_signal(sig)

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout=timeout)


@pytest.fixture
def wait_until():
    """`wait_until(predicate, timeout, what)`: poll with a deadline, never a bare sleep."""
    return poll_until


@pytest.fixture
def spawn(tmp_path: Path):
    """Start real subprocesses: `spawn([...argv], name="watch")` returns a Proc.
    Whatever is still running at the end of the test is killed (by its pid)."""
    procs: list[Proc] = []
    env = {k: v for k, v in os.environ.items() if k != "RECALL_DB"}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg-data")  # never the user's own index
    env["PYTHONUNBUFFERED"] = "1"

    def start(argv: list[str], name: str) -> Proc:
        proc = Proc([str(a) for a in argv], tmp_path, f"{name}-{len(procs)}", env, tmp_path)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.alive():
            proc.popen.kill()
        proc.popen.wait(timeout=10)


# --- small corpora for recall tests: real canonical logs, a real index ----------


class CorpusSession:
    """One session's canonical log file, written with CanonicalLog's API: each
    call (`message`, `delta`, `title`, `noise`) appends its line at once and
    returns the session, so calls chain.

    Timestamps default to `started_at` plus one second per message, so a
    session that started later also has later messages."""

    def __init__(self, path: Path, session_id: str, cwd: str, started_at: str):
        self.path = path
        self.log = CanonicalLog(session_id, cwd, started_at, clock_start=started_at)
        self.session_id, self.cwd, self.started_at = session_id, cwd, started_at

    def _write(self, line: bytes) -> CorpusSession:
        with open(self.path, "ab") as fh:
            fh.write(line)
        return self

    def next_ts(self) -> str:
        return self.log.next_ts()

    def session(self, title: str | None = None) -> CorpusSession:
        return self._write(self.log.session(title))

    def title(self, title: str) -> CorpusSession:
        return self._write(self.log.title(title))

    def message(self, message_id: str, text: str, *, role: str = "user", turn_id: str = "t1", ts: str | None = None,
                **extra) -> CorpusSession:
        """A settled message (`extra`: tool_name, attachments)."""
        return self._write(self.log.message(message_id, text, role=role, turn_id=turn_id, ts=ts, **extra))

    def delta(self, message_id: str, text: str, *, role: str = "assistant", turn_id: str = "t1") -> CorpusSession:
        return self._write(self.log.delta(message_id, text, role=role, turn_id=turn_id))

    def noise(self, n: int = 1) -> CorpusSession:
        return self._write(self.log.noise(n))


class Corpus:
    """Canonical session logs written under a temporary folder and indexed into
    a real database there: `corpus.session("s1", cwd).message("m1", "hello")`, then
    `ix = corpus.open(all_projects="deny")` (an Index with those Settings)."""

    def __init__(self, root: Path):
        self.root = root
        self.logs = root / "corpus-logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.db = root / "corpus.db"
        self.sessions: list[CorpusSession] = []
        self._opened: list[Index] = []

    def session(self, session_id: str, cwd: str | os.PathLike[str], *, title: str | None = None,
                started_at: str = "2026-11-20T09:00:00Z") -> CorpusSession:
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in session_id)[:40]
        path = self.logs / f"{len(self.sessions):04d}-{safe}.jsonl"
        s = CorpusSession(path, session_id, str(cwd), started_at).session(title)
        self.sessions.append(s)
        return s

    def open(self, **settings) -> Index:
        """The index of this corpus (synced now) with `Settings(**settings)`;
        closed at the end of the test."""
        from session_recall.config import Settings

        ix = Index.open(self.db, settings=Settings(**settings))
        self._opened.append(ix)
        ix.sync([str(self.logs)], kind="canonical")
        return ix

    def sync(self, ix: Index):
        return ix.sync([str(self.logs)], kind="canonical")

    def close(self) -> None:
        for ix in self._opened:
            ix.close()


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    """An empty project folder, the cwd that recall tests index and query."""
    p = tmp_path / "proj"
    p.mkdir()
    return p


@pytest.fixture
def isolated_settings(tmp_path: Path, monkeypatch):
    """Settings come only from what a test passes: no RECALL_* variables of
    the environment, and an empty config file instead of the user's (for
    `recall` subprocesses too, which inherit the environment)."""
    for key in list(os.environ):
        if key.startswith("RECALL_"):
            monkeypatch.delenv(key)
    empty = tmp_path / "empty-config.toml"
    empty.write_text("")
    monkeypatch.setenv("RECALL_CONFIG", str(empty))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    # No harness folder of this machine: a first use on an empty index builds
    # from them (README, "First use"), and a test's index holds only its own.
    # (Cursor's folder has no variable: ~/.cursor/projects, rarely on a test machine.)
    for var, folder in (("CLAUDE_CONFIG_DIR", "no-claude"), ("CODEX_HOME", "no-codex"),
                        ("GEMINI_CLI_HOME", "no-gemini"), ("XDG_DATA_HOME", "xdg-data"),
                        ("COPILOT_HOME", "no-copilot"), ("PI_CODING_AGENT_DIR", "no-pi")):
        monkeypatch.setenv(var, str(tmp_path / folder))
    monkeypatch.delenv("OPENCODE_DB", raising=False)


@pytest.fixture
def corpus(tmp_path: Path, isolated_settings):
    """A Corpus in this test's temporary folder."""
    c = Corpus(tmp_path)
    try:
        yield c
    finally:
        c.close()


# --- subprocesses run the code under test ----------------------------------------
# `recall ...` and `python -c ...` children import session_recall from this
# checkout, whatever copy of the package the interpreter has installed.
_ROOT = str(Path(__file__).resolve().parent.parent)
if os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] != _ROOT:
    os.environ["PYTHONPATH"] = os.pathsep.join([_ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])


@pytest.fixture
def open_index(tmp_path: Path):
    """Indexes in the test's folder (by name), each closed at the end."""
    opened: list[Index] = []

    def make(name: str = "recall") -> Index:
        ix = Index.open(tmp_path / f"{name}.db")
        opened.append(ix)
        return ix

    yield make
    for ix in opened:
        ix.close()
