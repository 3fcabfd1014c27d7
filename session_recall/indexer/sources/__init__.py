"""Source kinds. Each maps one kind of log to the same events (model.Event).

A parser is made per file, fed one complete line (bytes, without its newline)
at a time, and returns the events of that line or raises Skip(reason). Its
`state` is a small JSON-able dict saved with the file's offset in the same
transaction, so a resumed read continues exactly where the last one stopped.
"""

from __future__ import annotations

from .base import Parser, Skip, SourceBusy, load_object

__all__ = ["Parser", "Skip", "SourceBusy", "default_folders", "detect_database", "detect_kind", "kind_names", "kinds", "load_object"]


def kinds() -> dict[str, type[Parser]]:
    from .canonical import CanonicalParser
    from .claude_code import ClaudeCodeParser
    from .codex import CodexParser
    from .copilot import CopilotParser
    from .cursor import CursorParser
    from .gemini import GeminiParser
    from .opencode import OpenCodeParser
    from .pi import PiParser

    return {p.kind: p for p in (CanonicalParser, ClaudeCodeParser, CodexParser, GeminiParser, OpenCodeParser,
                                CursorParser, CopilotParser, PiParser)}


def kind_names() -> tuple[str, ...]:
    """Every source kind, and "auto" (detected per file) first."""
    return ("auto", *kinds())


def default_folders() -> list[tuple[str, str]]:
    """(folder, kind) of every harness's default log folders, whether or not
    they exist on this machine."""
    return [(folder, name) for name, parser in kinds().items() for folder in parser.default_folders()]


def detect_database(path: str) -> str | None:
    """The kind of an SQLite database, by the kinds that read databases."""
    for name, parser in kinds().items():
        if parser.database and parser.recognizes_database(path):
            return name
    return None


def detect_kind(first_lines: list[bytes]) -> str | None:
    for name, parser in kinds().items():
        if parser.detect(first_lines):
            return name
    return None
