"""Typed values shared by every part: the canonical log lines (§2.1) and the
internal Session/Message model that every source kind maps to."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["user", "assistant", "tool_call", "tool_result", "system"]
ROLES: tuple[str, ...] = ("user", "assistant", "tool_call", "tool_result", "system")


class Attachment(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,128}$")
    name: str
    mime_type: str = "application/octet-stream"
    bytes: int = Field(ge=0)


# --- the canonical log format, version 1 -------------------------------------


class _Line(BaseModel):
    model_config = ConfigDict(extra="ignore")


class SessionLine(_Line):
    type: Literal["session"]
    session_id: str = Field(min_length=1)
    cwd: str = Field(min_length=1)
    started_at: str
    title: str | None = None


class TitleLine(_Line):
    type: Literal["title"]
    session_id: str = Field(min_length=1)
    title: str


class MessageLine(_Line):
    type: Literal["message", "message_delta"]
    session_id: str = Field(min_length=1)
    message_id: str = Field(min_length=1)
    turn_id: str = ""
    role: Role
    ts: str
    text: str = ""
    tool_name: str | None = None
    # Validated one by one at ingest: a malformed attachment is skipped, not fatal.
    attachments: list[dict] = Field(default_factory=list)


# --- what every source kind yields -------------------------------------------


class SessionEvent(BaseModel):
    """Opens (or updates) a session; `title` None leaves the title alone."""

    session_id: str
    cwd: str
    started_at: str
    title: str | None = None


class TitleEvent(BaseModel):
    session_id: str
    cwd: str
    title: str


class MessageEvent(BaseModel):
    """A settled message (replaces any earlier text) or a delta (appends)."""

    session_id: str
    cwd: str
    message_id: str
    turn_id: str
    role: Role
    ts: str
    text: str
    attachments: list[Attachment] = Field(default_factory=list)
    settled: bool = True


Event = SessionEvent | TitleEvent | MessageEvent
