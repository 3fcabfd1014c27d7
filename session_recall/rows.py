"""Typed access to rows of queries that always yield one.

apsw types `Cursor.fetchone()` as `Any | None`; for an aggregate
(`count(*)`, `max(...)`), a `RETURNING` clause or a row known to exist the
`None` never comes, and `one()` says so once instead of at every call.
"""

from __future__ import annotations

from typing import Any

import apsw


def one(cursor: apsw.Cursor) -> Any:
    """The next row of `cursor`, which the query guarantees is there."""
    row = cursor.fetchone()
    if row is None:
        raise LookupError("the query yielded no row")
    return row
