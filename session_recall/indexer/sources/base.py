"""The protocol every source parser follows: Parser, Skip, load_object.

Parsers import it from here, not from the package (whose registry imports the
parsers).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import ClassVar

import orjson

from ...model import Event

_BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark


class Skip(Exception):
    """A line that is counted under `reason` and otherwise ignored."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class SourceBusy(Exception):
    """A source database that cannot be read now (locked by its app, or not
    yet a database): counted under `reason`; the next pass tries again."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


# In a str decoded by the standard library, every valid surrogate pair has
# already become one character: what is left is a lone surrogate.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _scrub(value):
    """Lone surrogates (valid JSON escapes, invalid text) become U+FFFD."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _parse_int(digits: str) -> int | float:
    """An integer too long for 64 bits becomes a float, as orjson makes it (and
    never a 4,300-digit int that Python refuses to convert or serialise)."""
    return int(digits) if len(digits) <= 19 else float(digits)


def load_object(line: bytes, *, typed: bool = True) -> dict:
    """Parse one log line into a JSON object, or raise Skip with the reason.
    `typed`: the object must have a string "type" (every kind's lines but
    Gemini CLI's, whose metadata and update records have none)."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            raise Skip("invalid_utf8") from None
        try:
            # orjson refuses lone surrogate escapes, numbers beyond a double
            # and deep nesting; the standard library accepts the first two
            # and bounds the third.
            value = _scrub(json.loads(text, parse_int=_parse_int))
        except RecursionError:
            raise Skip("too_deep") from None
        except ValueError:
            # A NUL byte outside a string's escapes is never JSON; it is named
            # apart because it usually means a damaged file (a crash that left
            # a run of zeros), not a writer's bug.
            raise Skip("nul_bytes" if b"\x00" in line else "malformed_json") from None
    if not isinstance(value, dict):
        raise Skip("not_object")
    if typed and not isinstance(value.get("type"), str):
        raise Skip("missing_type")
    return value


def _redact_unkeyed(text: str) -> str:
    """Safe, but its hashes are not the database's: the pipeline sets the keyed one."""
    from ...text.redact import Redactor

    return Redactor(b"").redact(text)[0]


class Parser:
    kind: ClassVar[str]
    # Where the harness keeps its logs by default, if it has such a place:
    # the environment variable that moves its home, the home under the
    # user's, and the log folders inside it (Index.default_sources).
    home_env: ClassVar[str | None] = None
    home: ClassVar[str | None] = None
    folders: ClassVar[tuple[str, ...]] = ()
    # File names this kind's logs have besides `*.jsonl` and `*.jsonl.zst`
    # (a regular expression matched against the whole name), e.g. Gemini
    # CLI's legacy `session-*.json`. A `*.json` file is a document: read
    # whole, as one line, and read again whole whenever it changes.
    names: ClassVar[str | None] = None
    # Whether this kind's logs include SQLite databases (`*.db`), which are
    # read by `read_database`, not by lines.
    database: ClassVar[bool] = False
    # The bytes that every line this kind indexes contains (its "type"
    # values); see is_noise.
    indexed_types: ClassVar[re.Pattern[bytes]]

    @classmethod
    def default_folders(cls) -> list[str]:
        """Where this harness keeps its logs by default, whether or not they
        exist: `folders` inside `$home_env`, else inside `~/home`."""
        if cls.home is None:
            return []
        home = os.environ.get(cls.home_env or "") or os.path.join(os.path.expanduser("~"), cls.home)
        return [os.path.join(home, folder) for folder in cls.folders]

    def __init__(self, path: str, state: dict | None = None):
        self.path = path
        self.state: dict = dict(state or {})
        # Problems inside a line that was still indexed (a malformed
        # attachment, say), counted by reason like skipped lines.
        self.notes: Counter[str] = Counter()
        # Text the parser keeps in its state (which is stored with the
        # file's offset) must be redacted first; the pipeline sets this.
        self.redact: Callable[[str], str] = _redact_unkeyed

    def feed(self, line: bytes) -> list[Event]:
        """The events of one line (any line: noise is recognised here too).
        A byte order mark (a log written by an editor or a Windows tool) is
        not part of the line: the first line keeps its message."""
        stripped = line.strip().removeprefix(_BOM).lstrip()
        if not stripped:
            raise Skip("blank")
        if self.is_noise(stripped):
            raise Skip("noise")
        return self.parse(load_object(stripped), stripped)

    def parse(self, obj: dict, raw: bytes) -> list[Event]:
        """The events of one parsed line (`raw` is its bytes, stripped)."""
        raise NotImplementedError

    @classmethod
    def is_noise(cls, line: bytes) -> bool:
        """Most lines of a real log are noise (progress, usage, snapshots...).
        A line is noise, counted and skipped without being parsed, when it looks
        like a JSON object with a "type" that names none of this kind's indexed
        types. Anything else (not an object, no "type" at all) is parsed, so
        that it is counted under its real reason. The sync's loop inlines this
        test for the common case of a line without surrounding white space."""
        return (line[:1] == b"{" and line[-1:] == b"}" and b'"type"' in line
                and cls.indexed_types.search(line) is None)

    @classmethod
    def detect(cls, first_lines: list[bytes]) -> bool:
        """Whether a file whose first lines these are is of this kind."""
        for line in first_lines:
            try:
                obj = orjson.loads(line.strip().removeprefix(_BOM))
            except orjson.JSONDecodeError:
                continue
            if isinstance(obj, dict) and cls.recognizes(obj):
                return True
        return False

    @classmethod
    def recognizes(cls, obj: dict) -> bool:
        """A line that only this kind writes."""
        raise NotImplementedError

    @classmethod
    def recognizes_database(cls, path: str) -> bool:
        """An SQLite database of this kind (kinds with `database`)."""
        return False

    @classmethod
    def read_database(cls, path: str, state: dict) -> Iterator[tuple[list[Event], dict, Counter[str]]]:
        """What changed in a database since `state`: (events, the state after
        them, skipped rows by reason) batches (kinds with `database`)."""
        raise NotImplementedError
