"""The migration registry: one place to add a migration, checked here; the
FTS table the migrations create keeps its settings."""

from __future__ import annotations

import re

import apsw
import pytest

from session_recall import migrations


def test_every_numbered_function_of_the_module_is_a_registered_migration():
    defined = sorted(name for name in vars(migrations) if re.fullmatch(r"m\d{3}_\w+", name))
    assert defined and [f.__name__ for f in migrations.MIGRATIONS] == defined
    numbers = [int(f.__name__[1:4]) for f in migrations.MIGRATIONS]
    assert numbers == list(range(1, len(numbers) + 1)), "numbered from 1 with no gap"


def test_the_schema_version_is_the_highest_migration_applied(tmp_path):
    conn = apsw.Connection(str(tmp_path / "m.db"))
    assert migrations.schema_version(conn) == 0
    migrations.apply(conn, upto=2)
    assert migrations.schema_version(conn) == 2
    migrations.apply(conn)
    assert migrations.schema_version(conn) == max(int(f.__name__[1:4]) for f in migrations.MIGRATIONS)


@pytest.mark.parametrize("name", ["m1_short", "migrate_all", "m0a1_x", "m001"])
def test_a_misnamed_migration_is_refused(name):
    def fn(conn):
        pass
    fn.__name__ = name
    with pytest.raises(ValueError, match="mNNN_what"):
        migrations.migration(fn)


def test_two_migrations_of_one_number_are_refused():
    def m001_again(conn):
        pass
    with pytest.raises(ValueError, match="two migrations numbered 1"):
        migrations.migration(m001_again)
    assert m001_again not in migrations.MIGRATIONS


def test_the_fts_table_keeps_its_settings(index):
    """FTS5 stores `hashsize` (migrations.FTS_SETTINGS) in its own config
    table, so every later connection writes with it."""
    from session_recall.migrations import FTS_SETTINGS

    stored = dict(index.store.conn.execute("SELECT k, v FROM message_fts_config"))
    assert FTS_SETTINGS and {k: stored.get(k) for k in FTS_SETTINGS} == FTS_SETTINGS
