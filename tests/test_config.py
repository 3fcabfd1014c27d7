"""Settings: a TOML file, overridden by RECALL_* environment variables; a bad
file stops with a message that names the key and what it allows."""

from __future__ import annotations

import pytest

from session_recall.config import ConfigError, load_settings


@pytest.fixture
def config(tmp_path, isolated_settings):
    path = tmp_path / "config.toml"

    def write(text: str):
        path.write_text(text, encoding="utf-8")
        return path

    return write


def test_every_key_is_read_from_the_file(config):
    s = load_settings(config("""
all_projects = "confirm"
allow_cwds = ["~/code"]
deny_cwds = ["~/code/secret"]
pinned_cwds = ["~/code/shop"]
recency_half_life_days = 30
redaction = "hash"
default_limit = 7
max_limit = 40
scan_budget_sessions = 50
first_use_budget_s = 2.5

[[sources]]
path = "~/sessions"
kind = "canonical"
"""))
    assert (s.all_projects, s.redaction, s.default_limit, s.max_limit) == ("confirm", "hash", 7, 40)
    assert (s.allow_cwds, s.deny_cwds, s.pinned_cwds) == (["~/code"], ["~/code/secret"], ["~/code/shop"])
    assert (s.recency_half_life_days, s.scan_budget_sessions, s.first_use_budget_s) == (30, 50, 2.5)
    assert [(src.path, src.kind) for src in s.sources] == [("~/sessions", "canonical")]


def test_the_environment_overrides_the_file(config, monkeypatch):
    path = config('all_projects = "deny"\nredaction = "hash"\n')
    monkeypatch.setenv("RECALL_ALL_PROJECTS", "allow")
    s = load_settings(path)
    assert (s.all_projects, s.redaction) == ("allow", "hash")


@pytest.mark.parametrize("text, names", [
    ('all_projects = "maybe"\n', ["all_projects", "'allow', 'deny' or 'confirm'", "maybe"]),
    ('redaction = "blur"\n', ["redaction", "'mask' or 'hash'", "blur"]),
    ("default_limit = 0\n", ["default_limit", "greater than or equal to 1"]),
    ("bogus = 1\n", ["bogus", "unknown key", "all_projects"]),
    ('[[sources]]\npath = "x"\nkind = "vim"\n', ["sources.0.kind", "claude-code", "vim"]),
    ("all_projects = \n", ["not valid TOML"]),
])
def test_a_bad_file_names_the_key_and_the_allowed_values(config, text, names):
    with pytest.raises(ConfigError) as err:
        load_settings(config(text))
    for name in names:
        assert name in str(err.value)


def test_a_missing_file_named_explicitly_is_an_error(tmp_path, isolated_settings):
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")


def test_the_cli_stops_on_a_bad_config_with_the_message(config, run_recall):
    path = config('all_projects = "maybe"\n')
    out = run_recall("--config", path, "status")
    assert out.returncode != 0
    assert "all_projects" in out.stderr and "confirm" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_bad_environment_value_names_the_variable_not_the_file(config, monkeypatch):
    path = config('redaction = "hash"\n')
    monkeypatch.setenv("RECALL_ALL_PROJECTS", "maybe")
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    message = str(err.value)
    assert "RECALL_ALL_PROJECTS" in message and "'allow', 'deny' or 'confirm'" in message
    assert str(path) not in message  # the file holds nothing wrong


def test_a_bad_file_value_beside_a_good_environment_names_the_file(config, monkeypatch):
    path = config('redaction = "blur"\n')
    monkeypatch.setenv("RECALL_ALL_PROJECTS", "deny")
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert f"redaction (in {path})" in str(err.value) and "RECALL_" not in str(err.value)


def test_an_unknown_file_key_is_the_files_even_beside_a_variable_of_its_name(config, monkeypatch):
    path = config('db = "/x"\n')
    monkeypatch.setenv("RECALL_DB", "/tmp/some.db")  # a variable of the command line, not a setting
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert f"db (in {path}): unknown key" in str(err.value) and "RECALL_DB" not in str(err.value)


@pytest.mark.parametrize("name", ["RECALL_SOURCES", "RECALL_ALLOW_CWDS"])
def test_a_list_variable_that_is_not_json_names_the_variable(isolated_settings, monkeypatch, name):
    monkeypatch.setenv(name, "notjson")
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert name in str(err.value) and "JSON" in str(err.value)
