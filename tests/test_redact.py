"""The redactor (contract section 6): one table of kinds, each found in every
syntax a log carries, placeholders kept readable, and a fast path (trigger
literals, then each kind only where its trigger is) that gives exactly what
running every pattern over the whole text gives."""

from __future__ import annotations

import json
import os
import random
import re
import string

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from session_recall.indexer.project import project
from session_recall.text import redact as R
from tests.secret_samples import OUTSIDE

EXAMPLES = int(os.environ.get("RECALL_REDACT_EXAMPLES", "200"))
KEY = b"k" * 32


# --- the table --------------------------------------------------------------------


def test_every_kind_has_examples_and_a_trigger_in_each_match():
    """A kind whose trigger is missing from one of its matches would be skipped
    by the prefilter and store that secret: every example match holds one."""
    for name in R.KINDS:
        rows = [k for k in R.TABLE if k.name == name]
        assert any(k.examples for k in rows), name
    for kind in R.TABLE:
        assert kind.triggers and all(t == t.lower() for t in kind.triggers), kind.name
        for text, secret in kind.examples:
            matches = [m.group() for m in kind.pattern.finditer(text)]
            assert matches, (kind.name, text)
            for m in matches:
                assert any(t in m.lower() for t in kind.triggers), (kind.name, m)


@pytest.mark.parametrize("kind,text,secret", [(k.name, t, s) for k in R.TABLE for t, s in k.examples])
def test_each_example_is_redacted_and_refused(kind, text, secret):
    out, n = R.Redactor(KEY).redact(text)
    assert secret not in out and n >= 1, out
    assert f"{R.PLACEHOLDER_OPEN}{kind}:" in out
    assert R.find_secret(text) == kind


@pytest.mark.parametrize("text,secret", OUTSIDE, ids=[t[:24] for t, _ in OUTSIDE])
def test_shapes_from_outside_the_table_are_redacted_and_refused(text, secret):
    """Provider prefixes and syntaxes taken from public scanners and formats,
    not from the table's own examples (tests/secret_samples.py, OUTSIDE)."""
    out, n = R.Redactor(KEY).redact(text)
    assert secret not in out and n >= 1, out
    assert R.find_secret(text) is not None


# --- the fast path equals the reference -------------------------------------------


def _reference_spans(text: str):
    """Every kind's pattern over the whole text, no prefilter, merged as _spans merges."""
    found = []
    for i, kind in enumerate(R.TABLE):
        for m in kind.pattern.finditer(text):
            span = R.span_of(kind, m, text)
            if span is not None:
                found.append((*span, i))
    found.sort()
    merged: list[list[int]] = []
    for s, e, i in found:
        if merged and s < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
            merged[-1][2] = min(merged[-1][2], i)
        else:
            merged.append([s, e, i])
    return [tuple(m) for m in merged]


FRAGMENTS = [
    "sk-", "sk-ant-", "sk-proj-", "rk_live_", "sk_live_", "ghp_", "github_pat_", "AKIA", "ASIA", "xoxb-", "xoxd-",
    "eyJ", "eyJhbGciOiJIUzI1NiJ9.", "://", ":\\/\\/", "user:pw@", "\\u0040", "@", "example.com", "Bearer ", "BEARER ",
    "password=", "PASSWORD=", "api_key=", "token=", "token: ", '"password": "', '\\"secret\\": \\"', "--password ",
    "mysql -p", "login x password ", "AccountKey=", "&sig=", "hvs.", "dop_v1_", "shpat_", "dapi", "123456789:AA",
    "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "\n", "A" * 64 + "\n",
    "ABCDEFGHIJKLMNOP1234", "abcdefghijklmnopqrstuvwxyz0123", "0123456789abcdef" * 2, "a.b", ".", " ", "=", ":",
    '"', "'", "中文", "é", "İ", "${X}",
]
TEXT = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=30).map("".join)


@settings(max_examples=EXAMPLES, deadline=None)
@given(TEXT)
def test_the_fast_path_equals_every_pattern_over_the_whole_text(text: str):
    text = R.scrub(text)
    assert R._spans(text) == _reference_spans(text)


def test_text_without_any_trigger_is_returned_as_it_is():
    text = "plain words, a path /usr/lib and 100% of nothing 中文"
    assert R.Redactor(b"k").redact(text) == (text, 0)


# --- every kind, generated values, every syntax -----------------------------------


def _like(secret: str, rnd: random.Random) -> str:
    """A fresh secret of the same shape: each character replaced by a random one of its class."""
    out = []
    for c in secret:
        for cls in ("0123456789", "abcdef", "ghijklmnopqrstuvwxyz", "ABCDEF", "GHIJKLMNOPQRSTUVWXYZ"):
            if c in cls:
                c = rnd.choice(cls)
                break
        out.append(c)
    return "".join(out)


SYNTAXES = [
    "{}", "use {} now", "{}\nnext line", "'{}'", '"{}"', "x={}", "export X={} && run", "(see {})",
]
KEYED_SYNTAXES = [
    "DB_PASSWORD={}", "password: {}\n", '{{"password": "{}"}}', '"{{\\"password\\": \\"{}\\"}}"',
    "--password {} --verbose", "--password={} ", "MYSQL_PWD='{}'", "client_secret = \"{}\"",
    '"apiKey": "{}",', "GITHUB_TOKEN={}", "X-Api-Key: {}\n", "  token: {}\n", "auth={}&x=1",
    # (PHP and Ruby hashes, Go, XML configs, NuGet.Config, a subscript, SQL)
    "'password' => '{}',", '"api_key" => "{}"', 'password := "{}"', "<password>{}</password>",
    '<add key="ClearTextPassword" value="{}" />', "ENV['DB_PASSWORD'] = '{}'", "ALTER ROLE app PASSWORD '{}';",
]
ALL = [(k, t, s) for k in R.TABLE for t, s in k.examples]


@pytest.mark.parametrize("name", R.KINDS)
@settings(max_examples=max(10, EXAMPLES // 5), deadline=None)
@given(data=st.data(), syntax=st.sampled_from(SYNTAXES), rnd=st.randoms(use_true_random=False))
def test_generated_secrets_of_every_kind_are_redacted_in_every_syntax(name, data, syntax, rnd):
    """Per kind: a fresh secret shaped like one of its examples, in each syntax."""
    kind, text, secret = data.draw(st.sampled_from([e for e in ALL if e[0].name == name]))
    fresh = _like(secret, rnd)
    if kind.name == "keyed_high_entropy":
        assume(R._entropy(fresh) >= 3.5)
    assume(not (kind.keep and kind.keep(fresh)))  # (a drawn placeholder: `ghp_xxxxxxxx...`)
    planted = text.replace(secret, fresh)
    if "\n" in planted and syntax.startswith("'"):
        syntax = "{}"
    if kind.name in ("password", "secret_value") and ": " in text and not text.endswith("\n"):
        syntax = "{}\nnext line"  # `key: value` is a value only when it ends its line (or is quoted)
    doc = syntax.format(planted)
    out, _ = R.Redactor(KEY).redact(doc)
    assert fresh not in out, (kind.name, doc, out)
    # and inside a tool call's JSON arguments, as the indexer projects them
    args = project("tool_call", json.dumps({"command": doc, "env": {"X": planted}}), "Bash")
    assert fresh not in R.Redactor(KEY).redact(args)[0]


VALUE = st.text(alphabet="abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789!%^*+=~", min_size=8, max_size=40)


@settings(max_examples=EXAMPLES, deadline=None)
@given(VALUE, st.sampled_from(KEYED_SYNTAXES))
def test_a_value_under_a_secret_key_is_redacted_whatever_its_shape(value, syntax):
    # (`KEY==x` is a comparison, not an assignment)
    assume(any(c.isdigit() for c in value) and not R.is_placeholder(value) and not value.startswith("="))
    doc = syntax.format(value)
    out, n = R.Redactor(KEY).redact(doc)
    assert value not in out and n >= 1, (doc, out)


@pytest.mark.parametrize("key", ["password", "DB_PASSWORD", "apiKey", "client_secret", "auth", "access_token",
                                 "AWS_SECRET_ACCESS_KEY", "privateKey", "credentials"])
def test_a_json_value_under_a_secret_key_is_redacted_in_tool_arguments(key):
    value = "plain words 42"  # no shape at all
    args = project("tool_call", json.dumps({"config": {key: value, "name": "shop"}}), "Write")
    out, _ = R.Redactor(KEY).redact(args)
    assert value not in out and "shop" in out


@pytest.mark.parametrize("args", [
    {"url": "https://api.example.org", "headers": {"Authorization": "Basic ZGVwbG95Om{v}"}},
    {"headers": {"Authorization": "token {v}"}},
    {"headers": {"Cookie": "_app_session={v}"}},
    {"env": [{"name": "DB_PASSWORD", "value": "{v}"}, {"name": "REGION", "value": "eu"}]},  # Kubernetes, ECS
    {"db_password": {"sensitive": True, "type": "string", "value": "{v}"}},  # terraform output -json
    {"fields": [{"id": "password", "type": "CONCEALED", "value": "{v}"}]},  # 1Password's op item get
    {"Name": "prod/db", "SecretString": "{v}"},  # AWS Secrets Manager
    {"request": {"header": [{"key": "Authorization", "value": "Basic ZGVwbG95Om{v}"}]}},  # Postman, HAR
    [{"creationTime": "2026-01-01T00:00:00Z", "keyName": "key1", "permissions": "FULL", "value": "{v}"}],  # az
])
def test_a_json_secret_named_by_its_header_sibling_or_parent_is_redacted(args):
    """A credential a JSON object names other than by its own key: an HTTP
    header's (`Authorization`, `Cookie`), a sibling's (`name`, `id`), or the
    key above the object that holds it."""
    value = "Xk9fVxT2Lm8Kp3Wn7Zs4"
    doc = json.loads(json.dumps(args).replace("{v}", value))
    out, n = R.Redactor(KEY).redact(project("tool_call", json.dumps(doc), "WebFetch"))
    assert value not in out and n >= 1, out


@pytest.mark.parametrize("text", [
    "kotlin_api_reference_documentation_generator", "get_api_org_members_for_current_user",
    "test_disk_test_benchmarks_suite", "network_live_migration", "monthly_highs_and_lows_by_ticker_symbol",
    "pip install sk-learn-compatible-estimators", "dbPassword is read from the vault", "bypass: the cache\n",
])
def test_identifiers_that_hold_a_providers_head_stay_readable(text):
    """Words that happen to begin, or hold, a provider's head (`lin_api_`,
    `api_org_`, `sk_test_`, `rk_live_`, `ghs_`, `sk-`) are no token: their body
    is lower-case words, not random."""
    assert R.Redactor(KEY).redact(text) == (text, 0)


@pytest.mark.parametrize("text", [
    'url = f"https://api.example.com/v1?api_key={api_key}&q={query}"', 'headers = f"token={auth_token}"',
    'conn = f"Server={host};Uid={user};Pwd={db_password};"', 'pw = getpass("Enter your database password: ")',
    'keyring.get_password("github-cli", "ada")', "bypass('cache')", "oauth('google', 'email profile')",
    "@requires_auth('admin', 'read')", "expect(validatePass('abc'))", "docker run -d --name mongo -p 27017:27017 mongo:7",
    "Use mongo or postgres, then run git diff -p main", "    renderPass: shadowPass,\n", "const firstPass = secondPass;\n",
    "    pw: bytes,\n", "    creds: Credentials,\n",
])
def test_code_that_names_a_password_without_holding_one_stays_readable(text):
    """A review's cases against redactor version 4's first form: format
    placeholders in braces, calls that take a prompt or a service name, a
    port mapping, identifiers that end in `Pass`, a type annotation."""
    assert R.Redactor(KEY).redact(text) == (text, 0)


@pytest.mark.parametrize("text", [
    "htpasswd -c -b .htpasswd ada {}", "htpasswd -nb ada {}", 'password: str | None = "{}"',
    "redis-cli -a '{}' ping", 'mongosh -u admin -p "{}"', 'curl --cookie "sessionid={}"',
    "https:\\/\\/hooks.zapier.com\\/hooks\\/catch\\/1234567\\/{}\\/",
])
def test_a_password_in_the_forms_a_review_found_is_redacted(text):
    value = "S3cretPw9QxZ"
    out, n = R.Redactor(KEY).redact(text.format(value))
    assert value not in out and n >= 1, out


@pytest.mark.parametrize("text", [
    "jira: PROJ-1234-feature\n", "kraken = 3.5.2-beta-release12", "twitter_handle = AdaLovelaceFan",
    'ALPHA_API = "client.authentication.k8s.io/v1alpha1"', "linear = torch.nn.Linear(64, 10)",
    "sentry-sdk==1.40.0", "okta_domain=dev-123456.okta.com", "asana: 12345678901234\n",
    "discord.py==2.3.2", "see mexico-city-travel-guide-2024 first", 'api_version = "2024-06-01-preview"',
    "access_log /var/log/nginx/access.log;", "apiVersion: apps/v1\n", 'stripe_api = getUserAccountSettingsHandler',
    "cat ~/.pgpass  # it is empty here\n", 'variable "db_password" {\n  type = string\n}',
    "      - name: LOG_LEVEL\n        value: info\n",
    # (a held-out probe's false positives of version 4's `..._key` rule: a relative path, an id)
    's3_key = "uploads/2024/06/11/invoice-38291.pdf"', "object_key: images/avatars/user-48213-thumb.webp\n",
    "cache_key: user-48213-profile-v2\n", 'idempotency_key = "order-2024-06-11-38291"',
    "partition_key: tenant_8231_2024\n", "sonar.projectKey=acme_payments-service_AYx3k2",
])
def test_provider_names_and_keys_without_a_secret_stay_readable(text):
    """Version 5's provider-named keys, `_access`/`_api` keys and tool
    syntaxes leave what holds no secret alone: a ticket, a version, a handle,
    a host, an API group, a call, camel case, a variable without a default."""
    assert R.Redactor(KEY).redact(text) == (text, 0)


@pytest.mark.parametrize("syntax", ["LENDFLOW_API_KEY={}", "lendflow_token: {}\n", "x_key={}", "--token {}",
                                    "datadog = {}", "stripe_api={}"])
def test_a_keyed_value_longer_than_a_line_of_text_goes_whole(syntax):
    """A held-out probe's tokens of 850-1,127 characters kept their tail past
    the 512th character in version 4."""
    rnd = random.Random(7)
    value = "".join(rnd.choice(string.ascii_letters + string.digits) for _ in range(1100))
    out, n = R.Redactor(KEY).redact(syntax.format(value))
    assert n == 1 and value[-16:] not in out and value[500:516] not in out, out


PLACEHOLDERS = ["${DB_PASS}", "$TOKEN", "<token>", "<your-api-key>", "your-key-here", "xxxx", "XXXXXXXX", "***",
                "changeme", "{{ secrets.TOKEN }}", "%API_KEY%", "REDACTED", "sk-...", "os.environ['X']", "null"]


@pytest.mark.parametrize("value", PLACEHOLDERS)
@pytest.mark.parametrize("syntax", KEYED_SYNTAXES)
def test_placeholders_stay_readable(value, syntax):
    doc = syntax.format(value)
    assert R.Redactor(KEY).redact(doc) == (doc, 0), doc


@pytest.mark.parametrize("text", ["ghp_" + "x" * 36, "sk-ant-api03-xxxxxxxxxxxxxxxxxxxx", "AKIAIOSFODNN7EXAMPLE",
                                  "sk_live_" + "0" * 24, "npm_" + "X" * 36])
def test_placeholder_tokens_stay_readable(text):
    assert R.Redactor(KEY).redact(text) == (text, 0)


@pytest.mark.parametrize("text", [
    "the password is in the vault", "password: see below for the rotation", "max_tokens=4096", "PWD=/home/ada",
    "input_tokens: 1200\n", "key=value", "the bearer of bad news", "--password-stdin", "git@github.com:org/repo.git",
    "https://example.org:8080/path/a@b", "token_type: bearer\n", "OAuth: enabled\n", "keyboard: us\n",
])
def test_ordinary_text_is_left_alone(text):
    assert R.Redactor(KEY).redact(text) == (text, 0)


# --- refusal -------------------------------------------------------------------


@pytest.mark.parametrize("query", ["AKIA1234", "ghp_abcd", "sk-ant-", "xoxb-12", "github_p", "glpat-abc", "hvs.CAES",
                                   "dop_v1_0f", "shpat_01", "sk-proj-", "sk_live_4e", "eyJhbGci1"])
def test_a_secret_prefix_is_refused(query):
    assert R.find_secret(query)
    assert R.find_secret(f"deploy {query}")


@pytest.mark.parametrize("query", ["sk-learn", "keyboard", "tokenizer", "password", "github", "akia", "npm_config_x",
                                   "hf_hub_download", "BEGIN", "bearer token", "xoxo", "eyJ",
                                   # (heads that are words of code: `_prefixed(..., refuse=False)`)
                                   "secret_key", "api_key", "API_KEY", "ico-converter", "API-gateway", "sk_learn"])
def test_ordinary_queries_are_not_refused(query):
    assert R.find_secret(query) is None


# --- speed -------------------------------------------------------------------------


def test_dense_trigger_text_is_linear():
    """Text made of trigger words: doubling it at most about doubles the time
    (a generous bound: CI machines are shared)."""
    import time

    r = R.Redactor(KEY)
    unit = 'password token key secret auth = : " sk- @ :// --password -p eyJ '

    def cost(n: int) -> float:
        text = unit * n
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            r.redact(text)
            best = min(best, time.perf_counter() - t)
        return best

    small, large = cost(2000), cost(8000)
    assert large < small * 4 * 2.5, (small, large)


# --- streams ----------------------------------------------------------------------


def test_a_stream_never_stores_a_secret_whose_trigger_came_in_an_earlier_fragment():
    """`Bearer` held back, then its token: stored whole only when the held
    word is at hand; after a restart (held word lost) the next word goes too."""
    r = R.Redactor(KEY)
    token = " abcdef0123456789abcdefXYZ done"
    first, _, held = r.stream("", "curl -H 'Authorization: Bearer", None)
    assert held == "Bearer"
    with_held, n, _ = r.stream(first, token, held)
    assert "abcdef0123" not in with_held and n == 1
    lost, _, _ = r.stream(first, token, None)
    assert "abcdef0123" not in lost and lost.endswith(" done")


def test_a_keyed_value_split_across_fragments_is_held_back():
    r = R.Redactor(KEY)
    for head, rest in (("config:\n  password: s3cr", "3tvalue99\nnext"), ("export DB_PASSWORD=", "s3cr3tvalue99\nnext"),
                       ("config:\n  password:", " s3cr3tvalue99\nnext")):
        first, _, held = r.stream("", head, None)
        assert "s3cr" not in first
        for h in (held, None):  # the held word at hand, or lost with a restart
            text, _, _ = r.stream(first, rest, h)
            assert "s3cr" not in text and "3tvalue99" not in text and text.endswith("next"), (head, h, text)


# --- every stored field --------------------------------------------------------------


def test_attachment_names_and_ids_holding_a_secret_are_redacted_at_ingest():
    """An attachment id is opaque and shown in `resource` addresses: one that
    holds a secret becomes `redacted-` and a keyed hash, still a valid id."""
    import re

    from session_recall.indexer.ingest import prepare
    from session_recall.model import Attachment, MessageEvent

    token = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    ev = MessageEvent(session_id="s", cwd="/p", message_id="m", turn_id="t", role="user", ts="2026-01-01T00:00:00Z",
                      text="see the file", attachments=[Attachment(id=token, name=f"notes {token}.txt", bytes=3)])
    prep = prepare(ev, R.Redactor(KEY))
    stored = json.loads(prep.attachments)[0]
    assert token not in prep.attachments and "A1b2C3d4" not in prep.body
    assert re.fullmatch(r"redacted-[0-9a-f]{16}", stored["id"]) and prep.secrets == 2
    assert re.fullmatch(r"^[A-Za-z0-9_-]{1,128}$", stored["id"])


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.from_regex(R._PLAIN_ID, fullmatch=True), st.from_regex(R._PLAIN_TS, fullmatch=True))
def test_the_ids_and_times_kept_without_the_table_hold_no_secret(plain_id: str, ts: str):
    """Redactor.redact_key and holds_secret keep a lower-case hex id and an
    ISO 8601 time without running the table: no kind can match one. The
    only triggers written in those letters are heads of upper-case kinds
    (`ACCA`, `EAAA`, `EAAC`, `BBDC-`, `BBFF-`, `NF-`, 21 `A`s), which match
    no lower-case text, and two heads whose body must hold a letter past `f`
    (`p8e-`, `4b1d`); the one written in a time's letters is Zoho's `1000.`."""
    assert R._spans(plain_id) == [] and R._spans(ts) == []
    # (every way a trigger can sit in such an id: after one letter, a hex
    # digit or a group's dash, before a digit, a dash or a block number)
    heads, tails = ["", "a", "a-", "a_", "a0", "0", "a0-", "0-", "a-0", "a_0", "0-0"], ["", "0", "-0", "#0", ":0", "0-0"]
    in_ids = {t for t in R._TRIGGERS if t != "\n" and any(R._PLAIN_ID.fullmatch(h + t + e) for h in heads for e in tails)}
    assert in_ids == {"acca", "eaaa", "eaac", "bbdc-", "bbff-", "nf-", "p8e-", "4b1d", "a" * 21}
    # (a time, lowered: only Zoho's `1000.` is written in its letters, and its
    # kind needs 65 hex digits and a dot after it, where a time has at most 9 digits)
    assert [t for t in R._TRIGGERS if set(t) <= set("0123456789-tz:.+ ")] == ["1000."]
    assert R._spans("2026-12-07T21:1000.123456789Z") == [] and R._spans("1000." + "0" * 9 + "Z") == []
    for t in ("p8e-", "4b1d"):
        ids = [t + body for body in ("0" * 40, "0123456789abcdef" * 3, "f" * 64)]
        assert all(R._PLAIN_ID.fullmatch(i) and R._spans(i) == [] for i in ids), t
    for t in in_ids - {"p8e-", "4b1d"}:
        for i in R._TRIGGERS[t]:
            assert not R.TABLE[i].pattern.flags & re.IGNORECASE, R.TABLE[i].name
            assert re.escape(t.upper()) in R.TABLE[i].pattern.pattern.replace("A{21}", "A" * 21), R.TABLE[i].name


def test_ids_holding_a_secret_are_stored_as_their_keyed_hash():
    r = R.Redactor(KEY)
    token = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    assert r.redact_key(token) == r.redact_key(token) != R.Redactor(b"other" * 8).redact_key(token)
    assert re.fullmatch(r"redacted-[0-9a-f]{16}", r.redact_key(token))
    assert r.redact_key(token + "#2") == r.redact_key(token) + "#2"  # (a Claude Code block's id)
    for plain in ("3f1c2d4e-0b9a-4e5f-8a7b-1c2d3e4f5a6b", "3f1c2d4e-0b9a#12", "u-cbc9e4b96b55ff8f90f2", "m12", "t3",
                  "msg_a1b2#prt_c3", "turn-a", "cc-0001"):
        assert r.redact_key(plain) == plain
    assert r.redact_key("sk-0123456789abcdef01") != "sk-0123456789abcdef01"  # (two letters: a key's head)
    assert r.holds_secret(f"2026-11-20T09:00:00Z {token}") and not r.holds_secret("2026-11-20T09:00:00.123+01:00")
    assert r.holds_secret(f"image/png; token={token}") and not r.holds_secret("image/png")


# --- the held tail of a stream ----------------------------------------------------

LONG_RUN = st.sampled_from(["", "", ("中" * 40 + " ") * 110, ("QUJD" * 12 + "\n") * 100, " " * 4200])


@settings(max_examples=min(EXAMPLES, 12), deadline=None)
@given(LONG_RUN, TEXT, st.sampled_from(["", "\n", "A" * 4090, "A" * 4097, "\n  QUJD\n", "password = ", "Bearer "]),
       TEXT)
def test_the_held_tail_is_found_where_the_whole_search_finds_it(head: str, a: str, middle: str, b: str):
    """_last_word and _long_tail start the search of the last 8 KiB where a
    match can begin: they find what searching from every position finds."""
    text = head + a + middle + b
    start = max(0, len(text) - 8192)
    for fast, pattern in ((R._last_word, R._LAST_WORD), (R._long_tail, R._LONG_TAIL)):
        want, got = pattern.search(text, start), fast(text)
        assert (want and want.span()) == (got and got.span()), pattern.pattern[:20]


@pytest.mark.parametrize("text", ["Bearer " + "QUJD" * 1025, "中文 " * 2000 + "password=\nQUJD\n  QUJD\n"],
                         ids=["a word of 4,100 characters", "a key and lines after"])
def test_the_held_tail_of_a_long_word_is_found_where_the_whole_search_finds_it(text: str):
    test_the_held_tail_is_found_where_the_whole_search_finds_it.hypothesis.inner_test("", text, "", "")


def test_finding_a_streams_held_tail_costs_less_than_redacting_its_text():
    """A streamed message's text is searched for a held tail at every
    fragment: it must not cost a try of the whole pattern at each of the
    last 8 KiB's positions (20 times the redaction of a 2 KB text)."""
    import time

    r = R.Redactor(KEY)
    text = ("The build reads each log once, and the index keeps what it read. " * 120)[:6000]

    def best(fn) -> float:
        out = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            fn()
            out = min(out, time.perf_counter() - t)
        return out

    redact = best(lambda: r.redact(text, keep_placeholders=True))
    tail = best(lambda: (R._last_word(text), R._long_tail(text)))
    assert tail < redact, (tail, redact)


def test_a_token_streamed_after_base64_lines_is_not_stored_in_part_at_any_cut():
    """Base64 lines before a token (a key's body whose header came elsewhere,
    then a JWT) are held as a key body's tail; the token's head, cut by a
    fragment, was redacted with them, and the rest of the token (its payload
    and signature) was stored as ordinary text."""
    r = R.Redactor(KEY)
    body = "hZGEifQ.FjUWiy77hnsqDUgECXNVGxLs7iUpM7"
    text = ("QUJD" * 19 + "\n") * 10 + "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ" + body + " end"
    for cut in range(760, len(text) - 4):
        stored, _, held = r.stream("", text[:cut], None)
        for held_at_hand in (held, None):
            whole, _, _ = r.stream(stored, text[cut:], held_at_hand)
            for s in (stored, whole):
                assert not any(body[i:i + 8] in s for i in range(len(body) - 7)), (cut, s[-70:])
