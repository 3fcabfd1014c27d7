"""`recall search` and `recall more` exit as grep does (README, "Exit codes"):
0 passages found, 1 no match, 2 bad input or an error, 3 refused or denied."""

from __future__ import annotations

import json

from tests.helpers import run_all


def test_exit_codes_follow_grep(proj, corpus, run_recall, tmp_path):
    s = corpus.session("s1", proj, title="Fonts", started_at="2026-11-20T09:00:00Z")
    s.message("u1", "Which serif font for the résumé?")
    s.message("a1", "Source Serif 4, set in eleven point.", role="assistant")
    ix = corpus.open()
    anchor = ix.recall("serif", cwd=str(proj)).results[0].passage.anchor_id
    ix.close()
    deny = tmp_path / "deny.toml"
    deny.write_text('all_projects = "deny"\n')
    db = ["--db", corpus.db]
    here = ["--cwd", proj]
    cases = {
        "hit": ([*db, "search", "serif", *here], 0),
        "no match": ([*db, "search", "zeppelin", *here], 1),
        "partial": ([*db, "search", "serif", "zeppelin", *here, "--json"], 1),
        "empty index": (["--db", tmp_path / "empty.db", "search", "serif", *here], 1),
        "empty query": ([*db, "search", "", *here], 2),
        "bad cursor": ([*db, "search", "serif", *here, "--cursor", "not-a-cursor"], 2),
        "bad anchor": ([*db, "more", "not-an-anchor", *here], 2),
        "unknown session": ([*db, "search", "serif", *here, "--session", "nope"], 2),
        "bad path": ([*db, "search", "serif", "--cwd", tmp_path / "no" / "such" / "dir"], 2),
        "refused": ([*db, "search", "sk-ant-api03-Zq8xVw2LmN4pRt6y", *here], 3),
        "denied": ([*db, "--config", deny, "search", "serif", "--all-projects"], 3),
        "more": ([*db, "more", anchor, *here], 0),
    }
    done = dict(zip(cases, run_all(run_recall, *(argv for argv, _ in cases.values()))))
    for name, (argv, code) in cases.items():
        assert done[name].returncode == code, (name, done[name].returncode, done[name].stdout, done[name].stderr)
        assert "Traceback" not in done[name].stderr, name
    # grep prints nothing on no match: the hint goes to stderr
    assert done["no match"].stdout == "" and "zeppelin" in done["no match"].stderr
    assert "no such directory" in done["bad path"].stderr
    assert json.loads(done["partial"].stdout)["status"] == "partial"  # the partial matches are printed
    assert "credential" in done["refused"].stderr and "deny" in done["denied"].stderr
