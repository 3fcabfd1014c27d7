"""The redactor's fast path (trigger literals, then only the kinds that could
match) gives exactly what the full alternation of every kind gives."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from session_recall.text import redact as R

FRAGMENTS = [
    "sk-", "sk-ant-", "sk-proj-", "rk_live_", "sk_live_", "ghp_", "github_pat_", "AKIA", "ASIA", "xoxb-", "eyJ",
    "eyJhbGciOiJIUzI1NiJ9.", "://", "user:pw@", "@", "example.com", "Bearer ", "bearer ", "password=",
    "PASSWORD=", "api_key=", "token=", "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----",
    "ABCDEFGHIJKLMNOP1234", "abcdefghijklmnopqrstuvwxyz0123", "a.b", ".", " ", "\n", "=", "中文", "é",
]
TEXT = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=30).map("".join)
EXAMPLES = int(os.environ.get("RECALL_REDACT_EXAMPLES", "400"))


def _full(redactor: R.Redactor, text: str) -> tuple[str, int]:
    count = 0

    def sub(m):
        nonlocal count
        count += 1
        return redactor._placeholder(m.lastgroup, m.group())

    return R._SECRET.sub(sub, R.scrub(text)), count


@settings(max_examples=EXAMPLES, deadline=None)
@given(TEXT)
def test_the_fast_path_equals_the_full_alternation(text: str):
    redactor = R.Redactor(b"k" * 32)
    assert redactor.redact(text) == _full(redactor, text)


def test_text_without_any_trigger_is_returned_as_it_is():
    text = "plain words, a path /usr/lib and 100% of nothing secret 中文"
    assert R.Redactor(b"k").redact(text) == (text, 0)


def test_a_stream_never_stores_a_secret_whose_trigger_came_in_an_earlier_fragment():
    """`Bearer` held back, then its token: stored whole only when the held
    word is at hand; after a restart (held word lost) the next word goes too."""
    r = R.Redactor(b"k" * 32)
    token = " abcdef0123456789abcdefXYZ done"
    first, _, held = r.stream("", "curl -H 'Authorization: Bearer", None)
    assert held == "Bearer"
    with_held, n, _ = r.stream(first, token, held)
    assert "abcdef0123" not in with_held and n == 1
    lost, _, _ = r.stream(first, token, None)
    assert "abcdef0123" not in lost and lost.endswith(" done")
