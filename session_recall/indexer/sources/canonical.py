"""The canonical log format, version 1 (contract §2.1)."""

from __future__ import annotations

import re

from pydantic import ValidationError

from ...model import Attachment, MessageEvent, MessageLine, SessionEvent, SessionLine, TitleEvent, TitleLine
from ..project import project
from .base import Parser, Skip

# Lines whose bytes do not name one of our types are noise (progress, usage,
# token counts...): most lines of a real log. They are counted and skipped
# without being parsed. A line that is not a JSON object at all is parsed, so
# that it is counted under its real reason.
_INDEXED_TYPES = re.compile(rb'"type"\s*:\s*"(?:session|title|message|message_delta)"')


def attachments(raw) -> tuple[list[Attachment], int]:
    """The valid attachments of a message and how many were malformed (a
    value that is not a list at all counts as one)."""
    if raw is None:
        return [], 0
    if not isinstance(raw, list):
        return [], 1
    good: list[Attachment] = []
    bad = 0
    for item in raw:
        try:
            good.append(Attachment.model_validate(item))
        except ValidationError:
            bad += 1
    return good, bad


class CanonicalParser(Parser):
    kind = "canonical"
    indexed_types = _INDEXED_TYPES

    @classmethod
    def recognizes(cls, obj: dict) -> bool:
        return obj.get("type") == "session" and "session_id" in obj

    def parse(self, obj: dict, raw: bytes):
        kind = obj["type"]
        try:
            if kind == "session":
                s = SessionLine.model_validate(obj)
                self.state.setdefault("cwd", {})[s.session_id] = s.cwd
                return [SessionEvent(session_id=s.session_id, cwd=s.cwd, started_at=s.started_at, title=s.title)]
            if kind == "title":
                t = TitleLine.model_validate(obj)
                return [TitleEvent(session_id=t.session_id, cwd=self._cwd(t.session_id), title=t.title)]
            if kind in ("message", "message_delta"):
                return [self._message(MessageLine.model_validate(obj))]
        except ValidationError:
            raise Skip("invalid_fields") from None
        raise Skip("noise")

    def _cwd(self, session_id: str) -> str:
        cwd = self.state.get("cwd", {}).get(session_id)
        if cwd is None:
            raise Skip("no_session")
        return cwd

    def _message(self, m: MessageLine) -> MessageEvent:
        cwd = self._cwd(m.session_id)
        text = project(m.role, m.text, m.tool_name)
        if text is None:
            raise Skip(f"role_{m.role}")
        atts, bad = attachments(m.attachments)
        if bad:
            self.notes["bad_attachment"] += bad
        settled = m.type == "message"
        # An empty settled message still goes to the writer: its (empty) text
        # replaces any deltas, and the writer counts it as `empty`.
        return MessageEvent(
            session_id=m.session_id,
            cwd=cwd,
            message_id=m.message_id,
            turn_id=m.turn_id,
            role=m.role,
            ts=m.ts,
            text=text,
            attachments=atts,
            settled=settled,
            prompt=m.role == "user",
        )
