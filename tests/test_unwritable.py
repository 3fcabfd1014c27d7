"""An index that cannot be written (a read-only file or folder, a full disk):
`recall` says so in words, never a traceback, and never calls it damaged (a
`doctor --repair` would move a healthy index aside); searches still work, and
once it can be written again the next `recall index` resumes."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import recall_command
from tests.test_bad_input import _without_file_mode_bypass


def _corpus(src: Path, sessions: int, messages: int) -> None:
    import orjson
    for s in range(sessions):
        lines = [{"type": "session", "session_id": f"s{s}", "cwd": "/home/ada/p", "started_at": "2026-11-20T09:00:00Z"}]
        lines += [{"type": "message", "session_id": f"s{s}", "message_id": f"m{i}", "turn_id": "t1", "role": "user",
                   "ts": "2026-11-20T10:00:00Z", "text": f"loquat {s} {i} " + "words of padding " * 20}
                  for i in range(messages)]
        (src / f"s{s}.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))


def _run(tree: Path, db: Path, *args: str, preexec=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECALL_")}
    env |= {"HOME": str(tree), "XDG_DATA_HOME": str(tree / "data"), "XDG_CONFIG_HOME": str(tree / "config")}
    return subprocess.run([*recall_command(), "--db", str(db), *args], preexec_fn=preexec, env=env, cwd=tree,
                          capture_output=True, text=True, timeout=60, check=False)


def test_a_read_only_index_is_searched_said_so_to_the_indexer_and_not_called_damaged():
    tree = Path(tempfile.mkdtemp(prefix="recall-readonly-"))
    try:
        src, db = tree / "src", tree / "db" / "r.db"
        src.mkdir()
        db.parent.mkdir()
        _corpus(src, 1, 3)
        assert _run(tree, db, "index", str(src)).returncode == 0
        os.chmod(tree, 0o755)
        os.chmod(db, 0o444)
        preexec = _without_file_mode_bypass() if os.geteuid() == 0 else None
        if preexec is not None:  # a child that cannot pass over file modes, else skip
            probe = subprocess.run(["sh", "-c", f"echo x >> {db}"], preexec_fn=preexec, capture_output=True,
                                   check=False)
            if probe.returncode == 0:
                pytest.skip("no child could be kept from writing a read-only file")
        found = _run(tree, db, "search", "loquat", "--all-projects", preexec=preexec)
        assert found.returncode == 0, found.stderr
        index = _run(tree, db, "index", str(src), preexec=preexec)
        assert index.returncode == 2 and "Traceback" not in index.stderr, index.stderr
        assert "read-only" in index.stderr and str(db) in index.stderr
        doctor = _run(tree, db, "doctor", "--repair", preexec=preexec)
        assert doctor.returncode == 0 and "healthy" in doctor.stdout, doctor.stdout + doctor.stderr
        assert sorted(p.name for p in db.parent.iterdir() if "damaged" in p.name) == []
    finally:
        os.chmod(tree / "db" / "r.db", 0o644)
        shutil.rmtree(tree)


def test_a_full_disk_stops_the_indexer_with_words_and_the_next_run_resumes(tmp_path):
    src, db = tmp_path / "src", tmp_path / "r.db"
    src.mkdir()
    _corpus(src, 4, 600)

    def small_files() -> None:  # writes past 1 MiB fail, as on a full disk
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    full = _run(tmp_path, db, "index", str(src), preexec=small_files)
    assert full.returncode == 2 and "Traceback" not in full.stderr, full.stderr
    assert "could not be written" in full.stderr and "resumes" in full.stderr
    assert _run(tmp_path, db, "doctor").returncode == 0
    done = _run(tmp_path, db, "index", "--json", str(src))
    assert done.returncode == 0, done.stderr
    status = _run(tmp_path, db, "status", "--json")
    assert '"messages": 2400' in status.stdout
