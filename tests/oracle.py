"""The oracle: the match predicate of docs/matching.md, written a second time,
by brute force, from the words of that page.

Nothing here comes from session_recall's folding, tokens, query parsing or
verification: the differential test (test_differential.py) compares two
independent readings of one page. The oracle also reads the canonical logs
itself (contract 2.1) instead of the index's stored text, so a message's
visible text is what the log says: a settled text, or the concatenation of
its deltas in file order while it streams.

Secrets: the test plants credential-shaped strings in the logs and tells the
oracle which ones. The page says a placeholder is one space for matching, so
the oracle applies the rule "each planted secret becomes one space": nothing
inside a secret matches, and a word beside it keeps its boundary. That is
the index's behaviour exactly when the redactor's spans are the planted
secrets, no wider and no other: the generator never lets a secret be followed
by a character a credential could continue with, and the test keeps only
corpora where the product's redactor (redaction is not matching) finds
exactly the planted spans. The oracle never reads the index's stored text.

Where the page leaves a choice open, the choice made here is marked READING.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

# --- 1. what is matched ------------------------------------------------------------

# "every run of white space (spaces, tabs, newlines, any Unicode space)".
# READING: white space is the Unicode White_Space property. The information
# separators U+001C..U+001F are control characters, not spaces (Python's
# str.isspace() counts them; Unicode does not).
WHITE_SPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    + "".join(chr(cp) for cp in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000"
)


def fold(s: str) -> str:
    """Step 2: Unicode NFKC, then full case folding."""
    return unicodedata.normalize("NFKC", s).casefold()


def collapse(s: str) -> str:
    """Step 3: every run of white space becomes a single space."""
    out: list[str] = []
    in_space = False
    for ch in s:
        if ch in WHITE_SPACE:
            if not in_space:
                out.append(" ")
            in_space = True
        else:
            out.append(ch)
            in_space = False
    return "".join(out)


def match_text(field_text: str, secrets: tuple[str, ...] | list[str] = ()) -> str:
    """The match text of one field. Step 1 (a secret, hence its placeholder,
    becomes one space) is applied to the planted secrets we know of."""
    for secret in secrets:
        field_text = field_text.replace(secret, " ")
    return collapse(fold(field_text))


# --- 3. character classes ----------------------------------------------------------

# "CJK characters are Han (with extensions and compatibility ideographs),
# Hiragana, Katakana, Hangul, and 々 〆 〇."
# READING: a character is CJK when its Unicode name says it is a unified or
# compatibility ideograph, a hiragana (hentaigana included) or katakana
# character, a mark shared by both kana, or a Hangul character. Han-script
# characters that are not ideographs (the Hangzhou numerals 〡..〩, 〻) are
# not CJK under this reading. Only characters of the folded text are ever
# asked about, so half-width forms (folded to full width by NFKC) need no rule.
_CJK_NAMES = (
    "CJK UNIFIED IDEOGRAPH-",
    "CJK COMPATIBILITY IDEOGRAPH-",
    "HIRAGANA ",
    "HENTAIGANA ",
    "KATAKANA ",
    "KATAKANA-HIRAGANA ",
    "COMBINING KATAKANA-HIRAGANA ",
    "HANGUL ",
)
_CJK_EXTRA = frozenset("々〆〇")

_word_cache: dict[str, bool] = {}


def is_cjk(ch: str) -> bool:
    return ch in _CJK_EXTRA or unicodedata.name(ch, "").startswith(_CJK_NAMES)


def is_word(ch: str) -> bool:
    """A letter, digit, mark or private-use character (L*, N*, M*, Co) that is not CJK."""
    known = _word_cache.get(ch)
    if known is None:
        cat = unicodedata.category(ch)
        known = (cat[0] in "LNM" or cat == "Co") and not is_cjk(ch)
        _word_cache[ch] = known
    return known


# --- 2. terms -------------------------------------------------------------------------


def split_terms(query: str) -> list[str]:
    """White space separates terms; a double quote makes one term of everything
    up to the next double quote, or to the end of the query when unclosed.

    READING: a quote opens a phrase only where a term starts (at the start of
    the query, after white space, or right after a closing quote); a quote in
    the middle of a word is an ordinary character of that word."""
    terms: list[str] = []
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch in WHITE_SPACE:
            i += 1
        elif ch == '"':
            close = query.find('"', i + 1)
            if close == -1:
                terms.append(query[i + 1 :])
                break
            terms.append(query[i + 1 : close])
            i = close + 1
        else:
            j = i
            while j < n and query[j] not in WHITE_SPACE:
                j += 1
            terms.append(query[i:j])
            i = j
    return terms


def terms(query: str) -> list[str]:
    """The folded terms of a query: folded and white space collapsed like a
    field; empty and repeated terms dropped.

    READING: white space at the ends of a term (possible inside quotes, or
    made by folding, `´` -> ` ́`) is not part of it."""
    out: list[str] = []
    for raw in split_terms(query):
        term = collapse(fold(raw)).strip(" ")
        if term and term not in out:
            out.append(term)
    return out


# --- 3. when a term matches a field --------------------------------------------------


def occurs(term: str, text: str) -> bool:
    """Some occurrence of `term` in `text` has, at each end of the term that
    is a word character, no word character beside it in the text."""
    n = len(term)
    left_is_word = is_word(term[0])
    right_is_word = is_word(term[-1])
    at = text.find(term)
    while at >= 0:
        left_ok = not left_is_word or at == 0 or not is_word(text[at - 1])
        end = at + n
        right_ok = not right_is_word or end == len(text) or not is_word(text[end])
        if left_ok and right_ok:
            return True
        at = text.find(term, at + 1)
    return False


def matches(query_terms: list[str], fields: list[str]) -> bool:
    """Every term matches at least one field. READING: a query without terms
    matches nothing (the page does not say; an empty query is not a search)."""
    if not query_terms:
        return False
    return all(any(occurs(t, f) for f in fields) for t in query_terms)


# --- reading the canonical logs ------------------------------------------------------


def _string_values(value) -> list[str]:
    """The string values of a decoded JSON value, in document order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _string_values(v)]
    if isinstance(value, list):
        return [s for v in value for s in _string_values(v)]
    return []


ESC, BEL, ST = "\x1b", "\x07", "\x9c"
CONTROL_STRINGS = frozenset("]PX^_")  # after ESC: OSC, DCS, SOS, PM, APC
C1_STRINGS = "\x90\x98\x9d\x9e\x9f"


def without_escapes(text: str) -> str:
    """docs/formats.md, "Terminal escape sequences are not text", read one
    character at a time."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\x9b" or (c == ESC and text[i + 1 : i + 2] == "["):  # a control sequence
            i += 1 if c == "\x9b" else 2
            while i < n and "0" <= text[i] <= "?":
                i += 1
            while i < n and " " <= text[i] <= "/":
                i += 1
            if i < n and "@" <= text[i] <= "~":
                i += 1
        elif c in C1_STRINGS or (c == ESC and text[i + 1 : i + 2] in CONTROL_STRINGS):  # a control string
            i += 1 if c in C1_STRINGS else 2
            while i < n and text[i] not in (BEL, ESC, ST, "\n"):
                i += 1
            if text[i : i + 1] in (BEL, ST):
                i += 1
            elif text[i : i + 2] == ESC + "\\":
                i += 2
        elif c == ESC:  # any other escape, or a lone ESC
            i += 1
            if i < n and " " <= text[i] <= "/":
                while i < n and " " <= text[i] <= "/":
                    i += 1
                if i < n and "0" <= text[i] <= "~":
                    i += 1
            elif i < n and "0" <= text[i] <= "~":
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def visible(role: str, text: str, tool_name: str | None) -> str | None:
    """The terminal escapes gone, that text as contract 2.2 says, for the
    simple shapes the test writes."""
    if role not in ("user", "assistant", "tool_call", "tool_result"):
        return None
    seen = _visible(role, text, tool_name)
    return None if seen is None else without_escapes(seen)


def _visible(role: str, text: str, tool_name: str | None) -> str | None:
    """Contract 2.2, for the simple shapes the test writes: user and assistant
    text verbatim; a tool call's name and the string values of its JSON
    arguments (or its plain argument text); a tool result's string values when
    it is JSON, else its text; system text is not searchable.

    docs/formats.md puts the name and each value on a line of its own ("one a
    line"). For matching a line break is white space like any other, but not
    for escapes: a control string without a terminator ends at its line, and
    `ESC` before a space is not `ESC` before a line break. So the pieces are
    joined with line breaks before the escapes go, never with spaces."""
    if role in ("user", "assistant"):
        return text
    if role not in ("tool_call", "tool_result"):
        return None
    body = text
    if text.lstrip()[:1] in ("{", "["):
        try:
            body = "\n".join(_string_values(json.loads(text)))
        except ValueError:
            body = text
    if role == "tool_call" and tool_name:
        return f"{tool_name}\n{body}"
    return body


@dataclass
class Message:
    cwd: str
    session_id: str
    message_id: str
    role: str = "user"
    tool_name: str | None = None
    text: str = ""
    settled: bool = False
    attachment_names: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.cwd, self.session_id, self.message_id)


@dataclass
class Corpus:
    """Every message of a set of canonical logs with its match texts."""

    messages: dict[tuple[str, str, str], Message]
    fields: dict[tuple[str, str, str], list[str]]

    def search(self, query: str) -> set[tuple[str, str, str]]:
        """The keys (cwd, session_id, message_id) of every message matching `query`."""
        qt = terms(query)
        return {key for key, fields in self.fields.items() if matches(qt, fields)}


def read_logs(paths: list[Path], secrets: tuple[str, ...] | list[str] = ()) -> Corpus:
    """Read canonical logs line by line, the way contract 2.1 describes them."""
    messages: dict[tuple[str, str, str], Message] = {}
    for path in paths:
        cwds: dict[str, str] = {}
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                kind = obj.get("type") if isinstance(obj, dict) else None
                if kind == "session":
                    cwds[obj["session_id"]] = obj["cwd"]
                elif kind in ("message", "message_delta"):
                    key = (cwds[obj["session_id"]], obj["session_id"], obj["message_id"])
                    msg = messages.get(key)
                    if msg is None:
                        msg = messages[key] = Message(*key)
                    msg.role = obj["role"]
                    msg.tool_name = obj.get("tool_name")
                    if kind == "message":  # settled: its text replaces any deltas
                        msg.text = obj.get("text", "")
                        msg.settled = True
                        msg.attachment_names = [a["name"] for a in obj.get("attachments") or []]
                    else:  # each fragment loses its terminal escapes as it comes (docs/formats.md)
                        msg.text += without_escapes(obj.get("text", ""))
    fields: dict[tuple[str, str, str], list[str]] = {}
    for key, msg in messages.items():
        text = visible(msg.role, msg.text, msg.tool_name)
        if text is None:
            continue
        fields[key] = [match_text(text, secrets)] + [match_text(n, secrets) for n in msg.attachment_names]
    return Corpus(messages, fields)
