"""session-recall: find what was said in past agent sessions.

    from session_recall import Index
    with Index.open("recall.db") as ix:
        ix.sync(["~/sessions"])
"""

from __future__ import annotations

__all__ = ["KINDS", "Index", "NotAnIndex", "WriterBusy"]
__version__ = "0.1.0"


def __getattr__(name: str):
    # Imported on first use: a parsing worker process imports the indexer's
    # pure modules, not the store, the query engine and the settings.
    if name in __all__:
        from . import index

        return getattr(index, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
