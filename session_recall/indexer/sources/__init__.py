"""Source kinds. Each maps one kind of log to the same events (model.Event).

A parser is made per file, fed one complete line (bytes, without its newline)
at a time, and returns the events of that line or raises Skip(reason). Its
`state` is a small JSON-able dict saved with the file's offset in the same
transaction, so a resumed read continues exactly where the last one stopped.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import ClassVar

import orjson

from ...model import Event


class Skip(Exception):
    """A line that is counted under `reason` and otherwise ignored."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _scrub(value):
    """Lone surrogates (valid JSON escapes, invalid text) become U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8") if _has_surrogate(value) else value
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _has_surrogate(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def load_object(line: bytes) -> dict:
    """Parse one log line into a JSON object, or raise Skip with the reason."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            raise Skip("invalid_utf8") from None
        try:
            # orjson refuses lone surrogate escapes and deep nesting; the
            # standard library accepts the first and bounds the second.
            value = _scrub(json.loads(text))
        except RecursionError:
            raise Skip("too_deep") from None
        except ValueError:
            raise Skip("malformed_json") from None
    if not isinstance(value, dict):
        raise Skip("not_object")
    if not isinstance(value.get("type"), str):
        raise Skip("missing_type")
    return value


class Parser:
    kind: ClassVar[str]

    def __init__(self, path: str, state: dict | None = None):
        self.path = path
        self.state: dict = dict(state or {})
        # Problems inside a line that was still indexed (a malformed
        # attachment, say), counted by reason like skipped lines.
        self.notes: Counter[str] = Counter()

    def feed(self, line: bytes) -> list[Event]:
        raise NotImplementedError

    @classmethod
    def detect(cls, first_lines: list[bytes]) -> bool:
        raise NotImplementedError


def kinds() -> dict[str, type[Parser]]:
    from .canonical import CanonicalParser

    return {CanonicalParser.kind: CanonicalParser}


def detect_kind(first_lines: list[bytes]) -> str | None:
    for name, parser in kinds().items():
        if parser.detect(first_lines):
            return name
    return None
