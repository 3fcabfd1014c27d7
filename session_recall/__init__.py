"""session-recall: find what was said in past agent sessions.

    from session_recall import Index
    with Index.open("recall.db") as ix:
        ix.sync(["~/sessions"])
"""

from .index import Index

__all__ = ["Index"]
__version__ = "0.1.0"
