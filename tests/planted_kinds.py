"""Kinds of secrets that agent logs carry, for the planted-secret corpus
(tests/planted.py, tests/test_planted_secrets.py).

An outside check of the redactor: the kinds come from what public secret
scanners look for (the shapes of gitleaks' default rules and detect-secrets'
plugins: provider prefixes, lengths, alphabets, the keys a value sits under),
never from the redactor's own patterns. Each kind has a seeded generator of
realistic random values and the syntaxes it appears in within agent logs.

A generator returns (value, secret): `value` is what is written in the log
(a token with its prefix, a whole URL, a whole PEM block), `secret` the part
of it that must never be stored or shown (the random part: a token's body, a
URL's password). Tests look for every 12-character piece of `secret`.

`ci` marks the kinds of the fast form; the long form
(RECALL_PLANTED_FULL=1) runs them all.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
LOWER = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
DIGITS = string.digits


def r(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choices(alphabet, k=n))


def password(rng: random.Random, n: int = 18, extra: str = "") -> str:
    """A password people use: mixed case, digits, some punctuation, and
    at least one letter and digit in every 6 characters (never a word)."""
    chars = rng.choices(ALNUM + extra, k=n)
    chars[::3] = rng.choices(ALNUM, k=len(chars[::3]))
    return "".join(chars)


# --- syntaxes ---------------------------------------------------------------------
# A syntax renders (KEY, value) as text an agent log holds. `key` is the
# environment-variable spelling (GITHUB_TOKEN); YAML and JSON use it lower-cased.


def _lower(key: str) -> str:
    return key.lower()


SYNTAXES: dict[str, Callable[[str, str], str]] = {
    "prose": lambda k, v: f"the value is {v} for now",
    "env": lambda k, v: f"{k}={v}",
    "export": lambda k, v: f'export {k}="{v}"',
    "dotenv_single": lambda k, v: f"{k}='{v}'",
    "yaml": lambda k, v: f"{_lower(k)}: {v}",
    "json": lambda k, v: json.dumps({_lower(k): v}),
    # JSON inside a JSON string: tool arguments written by a model
    "json_in_string": lambda k, v: json.dumps({"arguments": json.dumps({_lower(k): v})}),
    "flag": lambda k, v: f"deploy-tool --token {v} --region eu-west-1",
    "flag_eq": lambda k, v: f"deploy-tool --api-key={v}",
    "bearer": lambda k, v: f"curl -H 'Authorization: Bearer {v}' https://api.example.net/v1/me",
    "bearer_caps": lambda k, v: f"AUTHORIZATION: BEARER {v}",
    "x_api_key": lambda k, v: f"curl -H \"X-Api-Key: {v}\" https://api.example.net/v2/items",
    "password_flag": lambda k, v: f"psql-admin --user admin --password {v} --host db.internal",
    "mysql_p": lambda k, v: f"mysql -u root -p{v} -h db.internal shop",
    "sshpass": lambda k, v: f"sshpass -p '{v}' ssh deploy@10.20.0.12 uptime",
    # ~/.aws/credentials
    "aws_credentials": lambda k, v: f"[default]\naws_access_key_id = AKIA{'Q' * 16}\naws_secret_access_key = {v}",
    "native": lambda k, v: v,
    "native_env": lambda k, v: f"{k}={v}",
    "native_json": lambda k, v: json.dumps({_lower(k): v}),
    "native_yaml": lambda k, v: f"{_lower(k)}: {v}",
}

TOKEN = ("prose", "env", "export", "dotenv_single", "yaml", "json", "json_in_string", "flag", "flag_eq",
         "bearer", "bearer_caps", "x_api_key")
KEYED = ("env", "export", "dotenv_single", "yaml", "json", "json_in_string", "flag_eq")
PASSWORD = ("env", "export", "dotenv_single", "yaml", "json", "json_in_string", "password_flag", "mysql_p",
            "sshpass")
URL = ("native", "native_env", "native_json", "native_yaml")
BLOCK = ("native", "native_json")


@dataclass(frozen=True)
class Kind:
    name: str
    key: str  # the variable or config key it usually sits under
    make: Callable[[random.Random], tuple[str, str]]
    syntaxes: tuple[str, ...]
    ci: bool
    shaped: bool  # recognisable alone (a prefix, a URL with a password, a PEM block): a query of it is refused
    source: str  # the scanner rule that describes the shape

    def sample(self, rng: random.Random) -> tuple[str, str]:
        value, secret = self.make(rng)
        assert secret in value and len(secret) >= 12, (self.name, value, secret)
        return value, secret


def prefixed(prefix: str, n: int, alphabet: str = ALNUM, suffix: str = ""):
    def make(rng):
        body = r(rng, n, alphabet)
        return prefix + body + suffix, body
    return make


def _pem(label: str, lines: int = 8, head: str = ""):
    def make(rng):
        body_lines = [r(rng, 64, B64) for _ in range(lines)] + [r(rng, 24, B64) + "=="]
        body = "\n".join(body_lines)
        block = f"-----BEGIN {label}-----\n{head}{body}\n-----END {label}-----"
        return block, body_lines[0]
    return make


def _pem_multi(label: str, lines: int = 8):
    """A PEM block whose every body line is secret: the `secret` is the whole body."""
    def make(rng):
        body = "\n".join(r(rng, 64, B64) for _ in range(lines))
        return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----\n", body
    return make


def _pem_headerless(rng):
    # `tail -n +2 key.pem`: the body arrives without its header
    lines = ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC" + r(rng, 13, B64)]
    lines += [r(rng, 64, B64) for _ in range(9)]
    return "\n".join(lines), lines[3]


def _jwt(rng):
    header = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    payload = base64.urlsafe_b64encode(json.dumps(
        {"sub": r(rng, 10, LOWER), "iat": rng.randint(1_700_000_000, 1_800_000_000),
         "scope": "repo", "n": r(rng, 12)}).encode()).decode().rstrip("=")
    sig = r(rng, 43, B64URL)
    return f"{header}.{payload}.{sig}", sig


def _jwt_rs(rng):
    header = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ"
    payload = "eyJ" + r(rng, 90, B64URL)
    sig = r(rng, 120, B64URL)
    return f"{header}.{payload}.{sig}", payload[3:] + "." + sig


def _telegram(rng):
    body = "AA" + r(rng, 33, B64URL)
    return f"{rng.randint(10**8, 10**10 - 1)}:{body}", body


def _slack_bot(rng):
    body = r(rng, 24)
    return f"xoxb-{r(rng, 12, DIGITS)}-{r(rng, 13, DIGITS)}-{body}", body


def _slack_user(rng):
    body = r(rng, 32, HEX)
    return f"xoxp-{r(rng, 11, DIGITS)}-{r(rng, 12, DIGITS)}-{r(rng, 13, DIGITS)}-{body}", body


def _slack_cookie(rng):
    body = r(rng, 40) + "%2F" + r(rng, 30) + "%2B" + r(rng, 20) + "%3D"
    return f"xoxd-{body}", body


def _slack_app(rng):
    body = r(rng, 64, HEX)
    return f"xapp-1-A{r(rng, 10, UPPER)}-{r(rng, 13, DIGITS)}-{body}", body


def _slack_webhook(rng):
    body = r(rng, 24)
    return f"https://hooks.slack.com/services/T{r(rng, 8, UPPER)}/B{r(rng, 10, UPPER)}/{body}", body


def _discord_webhook(rng):
    body = r(rng, 68, B64URL)
    return f"https://discord.com/api/webhooks/{r(rng, 18, DIGITS)}/{body}", body


def _discord_bot(rng):
    body = rng.choice("MN") + r(rng, 23) + "." + r(rng, 6, B64URL) + "." + r(rng, 27, B64URL)
    return body, body


def _openai_legacy(rng):
    body = r(rng, 20) + "T3BlbkFJ" + r(rng, 20)
    return "sk-" + body, body


def _openai_proj(rng):
    body = r(rng, 58, B64URL) + "T3BlbkFJ" + r(rng, 58, B64URL)
    return "sk-proj-" + body, body


def _openai_svc(rng):
    body = r(rng, 58, B64URL) + "T3BlbkFJ" + r(rng, 58, B64URL)
    return "sk-svcacct-" + body, body


def _anthropic(kind: str):
    def make(rng):
        body = r(rng, 93, B64URL) + "AA"
        return f"sk-ant-{kind}-{body}", body
    return make


def _sendgrid(rng):
    body = r(rng, 22, B64URL) + "." + r(rng, 43, B64URL)
    return "SG." + body, body


def _pypi(rng):
    body = r(rng, 120, B64URL)
    return "pypi-AgEIcHlwaS5vcmc" + body, body


def _aws_session(rng):
    body = r(rng, 300, B64)
    return "IQoJb3JpZ2luX2VjE" + body, body


def _azure_conn(rng):
    key = r(rng, 86, B64) + "=="
    conn = (f"DefaultEndpointsProtocol=https;AccountName=shop{r(rng, 6, LOWER)};AccountKey={key};"
            "EndpointSuffix=core.windows.net")
    return conn, key[:86]


def _azure_sas(rng):
    sig = r(rng, 20) + "%2B" + r(rng, 20) + "%2F" + r(rng, 3) + "%3D"
    url = (f"https://shop{r(rng, 6, LOWER)}.blob.core.windows.net/backups/db.bak?sv=2022-11-02&ss=b&srt=o"
           f"&sp=r&se=2026-12-31T00:00:00Z&spr=https&sig={sig}")
    return url, sig


def _azure_client_secret(rng):
    body = r(rng, 3) + "8Q~" + r(rng, 31, ALNUM + "_~.-")
    return body, body


def _gcp_service_account(rng):
    pem_lines = [r(rng, 64, B64) for _ in range(10)]
    key = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(pem_lines) + "\n-----END PRIVATE KEY-----\n"
    doc = {"type": "service_account", "project_id": "shop-prod-31337", "private_key_id": r(rng, 40, HEX),
           "private_key": key, "client_email": "deployer@shop-prod-31337.iam.gserviceaccount.com",
           "client_id": r(rng, 21, DIGITS), "token_uri": "https://oauth2.googleapis.com/token"}
    return json.dumps(doc, indent=2), pem_lines[2]


def _url(scheme_host: str, user: str, extra: str = "", pw_extra: str = "/@"):
    def make(rng):
        pw = password(rng, 26)
        # a password holding the characters that make URL parsing hard
        special = rng.choice([c for c in pw_extra]) if pw_extra else ""
        pw_written = pw[:10] + special + pw[10:]
        return f"{scheme_host[0]}{user}:{pw_written}@{scheme_host[1]}{extra}", pw[10:]
    return make


def _url_pct(rng):
    pw = password(rng, 20)
    written = pw[:8] + "%40" + pw[8:] + "%2F"
    return f"https://ci-bot:{written}@git.example.org/shop/backend.git", pw[8:]


def _url_json_escaped(rng):
    # a URL as a JSON string writes its slashes escaped (PHP, some loggers)
    pw = password(rng, 20)
    return f"https:\\/\\/deploy:{pw}@registry.example.org\\/v2\\/", pw


def _redis_nouser(rng):
    pw = password(rng, 24)
    return f"redis://:{pw}@cache.internal:6379/0", pw


def _jdbc_pg(rng):
    pw = password(rng, 20)
    return f"jdbc:postgresql://db.internal:5432/shop?user=app&password={pw}&ssl=true", pw


def _jdbc_sqlserver(rng):
    pw = password(rng, 20)
    return (f"jdbc:sqlserver://sql.internal:1433;databaseName=shop;user=sa;password={pw};"
            "encrypt=true"), pw


def _jdbc_mysql(rng):
    pw = password(rng, 20)
    return f"jdbc:mysql://app:{pw}@mysql.internal:3306/shop", pw


def _kube_token(rng):
    sa = "eyJhbGciOiJSUzI1NiIsImtpZCI6IiJ9.eyJ" + r(rng, 100, B64URL) + "." + r(rng, 80, B64URL)
    text = ("apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://10.0.0.1:6443\n"
            "  name: prod\nusers:\n- name: admin\n  user:\n    token: " + sa + "\n")
    return text, sa.split(".")[1][3:]


def _kube_client_key(rng):
    data = base64.b64encode(("-----BEGIN RSA PRIVATE KEY-----\n" + r(rng, 200, B64)).encode()).decode()
    text = ("users:\n- name: admin\n  user:\n    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t\n"
            "    client-key-data: " + data + "\n")
    return text, data[60:]


def _docker_login(rng):
    pw = password(rng, 22)
    return f"docker login -u deployer -p {pw} registry.example.org", pw


def _docker_config(rng):
    pw = password(rng, 24)
    auth = base64.b64encode(f"deployer:{pw}".encode()).decode()
    doc = {"auths": {"registry.example.org": {"auth": auth}, "https://index.docker.io/v1/": {"auth": auth}}}
    return json.dumps(doc, indent=2), auth[12:]


def _netrc(rng):
    pw = password(rng, 20)
    return f"machine api.example.org\n  login deploy\n  password {pw}\n", pw


def _netrc_oneline(rng):
    pw = password(rng, 20)
    return f"machine git.example.org login ci password {pw}", pw


def _npmrc(rng):
    body = r(rng, 36)
    return f"//registry.npmjs.org/:_authToken=npm_{body}", body


def _basic_auth(rng):
    pw = password(rng, 20)
    enc = base64.b64encode(f"admin:{pw}".encode()).decode()
    return f"Authorization: Basic {enc}", enc[8:]


def _curl_user(rng):
    pw = password(rng, 20)
    return f"curl -u admin:{pw} https://jenkins.example.org/api/json", pw


def _ssws(rng):
    body = "00" + r(rng, 40, B64URL)
    return f"Authorization: SSWS {body}", body


def _terraform(rng):
    body = r(rng, 14) + ".atlasv1." + r(rng, 67, B64URL)
    return body, body


def _age(rng):
    body = r(rng, 58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L")
    return "AGE-SECRET-KEY-1" + body, body


def _google_oauth(rng):
    body = r(rng, 150, B64URL)
    return "ya29." + body, body


def _google_refresh(rng):
    body = r(rng, 90, B64URL)
    return "1//0" + body, body


def _facebook(rng):
    body = r(rng, 150)
    return "EAACEdEose0cBA" + body, body


def _twitter_bearer(rng):
    body = r(rng, 30) + "%2B" + r(rng, 50)
    return "AAAAAAAAAAAAAAAAAAAAA" + body, body


def _heroku_uuid(rng):
    v = f"{r(rng, 8, HEX)}-{r(rng, 4, HEX)}-4{r(rng, 3, HEX)}-a{r(rng, 3, HEX)}-{r(rng, 12, HEX)}"
    return v, v[14:]


def _email(rng):
    local = r(rng, 14, string.ascii_lowercase)
    return f"{local}.ops@shop-example.com", local


def _django_secret(rng):
    body = r(rng, 50, ALNUM + "!@#%^&*(-_=+)")
    return body, body


def _hex_key(n):
    def make(rng):
        body = r(rng, n, HEX)
        return body, body
    return make


def _raw(n, alphabet=ALNUM):
    def make(rng):
        body = r(rng, n, alphabet)
        return body, body
    return make


def _pw(n=20, extra="!#$%&*+-.=?^_~"):
    def make(rng):
        body = password(rng, n, extra)
        return body, body
    return make


def _sentry_org(rng):
    body = r(rng, 120, B64URL)
    return "sntrys_eyJpYXQiOjE3" + body, body


def _grafana_sa(rng):
    body = r(rng, 32) + "_" + r(rng, 8, HEX)
    return "glsa_" + body, body


def _postman(rng):
    body = r(rng, 24, HEX) + "-" + r(rng, 34, HEX)
    return "PMAK-" + body, body


def _cloudflare_origin(rng):
    body = r(rng, 146, HEX)
    return "v1.0-" + r(rng, 24, HEX) + "-" + body, body


def _atlassian(rng):
    body = r(rng, 180, B64URL) + "=" + r(rng, 8, HEX.upper())
    return "ATATT3xFfGF0" + body, body


def _planetscale_pw(rng):
    body = r(rng, 43, B64URL)
    return "pscale_pw_" + body, body


def _shopify(prefix):
    return prefixed(prefix, 32, HEX)


K = Kind
# name, key, generator, syntaxes, ci, shaped, the scanner rule it follows
KINDS: list[Kind] = [
    # --- code hosting -----------------------------------------------------------------
    K("github_pat", "GITHUB_TOKEN", prefixed("ghp_", 36), TOKEN, True, True, "gitleaks github-pat"),
    K("github_oauth", "GH_TOKEN", prefixed("gho_", 36), TOKEN, True, True, "gitleaks github-oauth"),
    K("github_app_user", "GITHUB_TOKEN", prefixed("ghu_", 36), TOKEN, False, True, "gitleaks github-app-token"),
    K("github_app_server", "GITHUB_TOKEN", prefixed("ghs_", 36), TOKEN, True, True, "gitleaks github-app-token"),
    K("github_refresh", "GITHUB_REFRESH_TOKEN", prefixed("ghr_", 36), KEYED, False, True,
      "gitleaks github-refresh-token"),
    K("github_fine_grained", "GITHUB_TOKEN", prefixed("github_pat_", 82, ALNUM + "_"), TOKEN, True, True,
      "gitleaks github-fine-grained-pat"),
    K("gitlab_pat", "GITLAB_TOKEN", prefixed("glpat-", 20, B64URL), TOKEN, True, True, "gitleaks gitlab-pat"),
    K("gitlab_pipeline_trigger", "TRIGGER_TOKEN", prefixed("glptt-", 40, HEX), KEYED, False, True,
      "gitleaks gitlab-ptt"),
    K("gitlab_runner", "RUNNER_TOKEN", prefixed("glrt-", 20, B64URL), KEYED, False, True, "gitleaks gitlab-rrt"),
    K("gitlab_deploy", "CI_DEPLOY_PASSWORD", prefixed("gldt-", 20, B64URL), KEYED, False, True,
      "gitleaks gitlab-deploy-token"),
    K("bitbucket_app_password", "BITBUCKET_APP_PASSWORD", prefixed("ATBB", 32), KEYED, False, True,
      "detect-secrets keyword / Atlassian ATBB"),
    # --- chat -------------------------------------------------------------------------
    K("slack_bot", "SLACK_BOT_TOKEN", _slack_bot, TOKEN, True, True, "gitleaks slack-bot-token"),
    K("slack_user", "SLACK_TOKEN", _slack_user, TOKEN, True, True, "gitleaks slack-user-token"),
    K("slack_cookie_xoxd", "SLACK_COOKIE", _slack_cookie, KEYED + ("prose",), True, True,
      "gitleaks slack-legacy/xoxd cookie"),
    K("slack_app", "SLACK_APP_TOKEN", _slack_app, KEYED, False, True, "gitleaks slack-app-token"),
    K("slack_webhook", "SLACK_WEBHOOK_URL", _slack_webhook, URL, True, True, "gitleaks slack-webhook-url"),
    K("discord_webhook", "DISCORD_WEBHOOK", _discord_webhook, URL, False, True, "gitleaks discord webhook"),
    K("discord_bot", "DISCORD_TOKEN", _discord_bot, KEYED, False, False, "detect-secrets DiscordBotTokenDetector"),
    K("telegram_bot", "TELEGRAM_BOT_TOKEN", _telegram, TOKEN, True, True, "gitleaks telegram-bot-api-token"),
    # --- payments ---------------------------------------------------------------------
    K("stripe_live", "STRIPE_SECRET_KEY", prefixed("sk_live_", 99), TOKEN, True, True, "gitleaks stripe-access-token"),
    K("stripe_restricted", "STRIPE_KEY", prefixed("rk_live_", 99), TOKEN, True, True, "gitleaks stripe-access-token"),
    K("stripe_test", "STRIPE_SECRET_KEY", prefixed("sk_test_", 99), KEYED, False, True,
      "gitleaks stripe-access-token"),
    K("stripe_webhook", "STRIPE_WEBHOOK_SECRET", prefixed("whsec_", 32), KEYED, True, True,
      "detect-secrets StripeDetector (webhook)"),
    K("square_access", "SQUARE_ACCESS_TOKEN", prefixed("EAAA", 60, B64URL), KEYED, False, True,
      "gitleaks square-access-token"),
    K("shopify_access", "SHOPIFY_ACCESS_TOKEN", _shopify("shpat_"), TOKEN, True, True,
      "gitleaks shopify-access-token"),
    K("shopify_custom_app", "SHOPIFY_TOKEN", _shopify("shpca_"), KEYED, False, True,
      "gitleaks shopify-custom-access-token"),
    K("shopify_private_app", "SHOPIFY_PASSWORD", _shopify("shppa_"), KEYED, False, True,
      "gitleaks shopify-private-app-access-token"),
    K("shopify_shared_secret", "SHOPIFY_API_SECRET", _shopify("shpss_"), KEYED, False, True,
      "gitleaks shopify-shared-secret"),
    # --- AI APIs ----------------------------------------------------------------------
    K("openai_legacy", "OPENAI_API_KEY", _openai_legacy, TOKEN, True, True, "gitleaks openai-api-key"),
    K("openai_project", "OPENAI_API_KEY", _openai_proj, TOKEN, True, True, "gitleaks openai-api-key"),
    K("openai_service_account", "OPENAI_API_KEY", _openai_svc, KEYED, False, True, "gitleaks openai-api-key"),
    K("openai_admin", "OPENAI_ADMIN_KEY", prefixed("sk-admin-", 100, B64URL), KEYED, False, True,
      "gitleaks openai-api-key"),
    K("anthropic_api", "ANTHROPIC_API_KEY", _anthropic("api03"), TOKEN, True, True, "gitleaks anthropic-api-key"),
    K("anthropic_admin", "ANTHROPIC_ADMIN_KEY", _anthropic("admin01"), KEYED, True, True,
      "gitleaks anthropic-admin-api-key"),
    K("huggingface", "HF_TOKEN", prefixed("hf_", 34, string.ascii_letters), TOKEN, True, True,
      "gitleaks huggingface-access-token"),
    K("huggingface_org", "HF_ORG_TOKEN", prefixed("api_org_", 34, string.ascii_letters), KEYED, False, True,
      "gitleaks huggingface-organization-api-token"),
    K("replicate", "REPLICATE_API_TOKEN", prefixed("r8_", 37), KEYED, False, True, "scanner: replicate r8_"),
    K("groq", "GROQ_API_KEY", prefixed("gsk_", 52), KEYED, True, True, "scanner: groq gsk_"),
    K("perplexity", "PERPLEXITY_API_KEY", prefixed("pplx-", 48), KEYED, False, True, "gitleaks perplexity-api-key"),
    K("google_api_key", "GOOGLE_API_KEY", prefixed("AIza", 35, B64URL), TOKEN, True, True, "gitleaks gcp-api-key"),
    K("cohere_keyed", "COHERE_API_KEY", _raw(40), KEYED, False, False, "gitleaks cohere-api-token (keyword)"),
    K("mistral_keyed", "MISTRAL_API_KEY", _raw(32), KEYED, False, False, "keyword api_key"),
    # --- cloud ------------------------------------------------------------------------
    K("aws_access_key_id", "AWS_ACCESS_KEY_ID", prefixed("AKIA", 16, UPPER), TOKEN, True, True, "gitleaks aws-access-token"),
    K("aws_temp_key_id", "AWS_ACCESS_KEY_ID", prefixed("ASIA", 16, UPPER), KEYED, False, True,
      "gitleaks aws-access-token"),
    K("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", _raw(40, B64), KEYED + ("aws_credentials",), True, False,
      "detect-secrets AWSKeyDetector (secret key by keyword)"),
    K("aws_session_token", "AWS_SESSION_TOKEN", _aws_session, KEYED, False, True, "AWS STS session token"),
    K("gcp_service_account", "GOOGLE_CREDENTIALS", _gcp_service_account, BLOCK, True, True,
      "gitleaks private-key / gcp service account"),
    K("gcp_oauth_client_secret", "GOOGLE_CLIENT_SECRET", prefixed("GOCSPX-", 28, B64URL), KEYED, True, True,
      "gitleaks gcp oauth client secret"),
    K("google_oauth_access", "GOOGLE_ACCESS_TOKEN", _google_oauth, ("bearer", "env", "json"), False, True,
      "google ya29 access token"),
    K("google_refresh", "GOOGLE_REFRESH_TOKEN", _google_refresh, ("env", "json"), False, True,
      "google 1// refresh token"),
    K("azure_storage_conn", "AZURE_STORAGE_CONNECTION_STRING", _azure_conn, URL, True, True,
      "gitleaks azure storage account key"),
    K("azure_sas", "AZURE_SAS_URL", _azure_sas, URL, True, True, "Azure SAS sig"),
    K("azure_client_secret", "AZURE_CLIENT_SECRET", _azure_client_secret, KEYED, True, False,
      "gitleaks azure-ad-client-secret"),
    K("digitalocean_pat", "DIGITALOCEAN_TOKEN", prefixed("dop_v1_", 64, HEX), TOKEN, True, True,
      "gitleaks digitalocean-pat"),
    K("digitalocean_oauth", "DO_OAUTH_TOKEN", prefixed("doo_v1_", 64, HEX), KEYED, False, True,
      "gitleaks digitalocean-access-token"),
    K("digitalocean_refresh", "DO_REFRESH_TOKEN", prefixed("dor_v1_", 64, HEX), KEYED, False, True,
      "gitleaks digitalocean-refresh-token"),
    K("databricks", "DATABRICKS_TOKEN", prefixed("dapi", 32, HEX), TOKEN, True, True, "gitleaks databricks-api-token"),
    K("heroku_new", "HEROKU_API_KEY", prefixed("HRKU-AA", 58, B64URL), KEYED, True, True, "gitleaks heroku-api-key-v2"),
    K("heroku_uuid", "HEROKU_API_KEY", _heroku_uuid, KEYED, False, False, "gitleaks heroku-api-key"),
    K("cloudflare_api_token", "CLOUDFLARE_API_TOKEN", _raw(40, B64URL), KEYED, True, False,
      "gitleaks cloudflare-api-key (keyword)"),
    K("cloudflare_origin_ca", "CF_ORIGIN_CA_KEY", _cloudflare_origin, KEYED, False, True,
      "gitleaks cloudflare-origin-ca-key"),
    K("fly_io", "FLY_API_TOKEN", prefixed("fo1_", 43, B64URL), KEYED, False, True, "gitleaks flyio-access-token"),
    K("vercel_keyed", "VERCEL_TOKEN", _raw(24), KEYED, False, False, "keyword token"),
    K("supabase", "SUPABASE_ACCESS_TOKEN", prefixed("sbp_", 40, HEX), KEYED, True, True, "supabase sbp_"),
    K("planetscale_token", "PLANETSCALE_TOKEN", prefixed("pscale_tkn_", 43, B64URL), KEYED, False, True,
      "gitleaks planetscale-api-token"),
    K("planetscale_password", "DATABASE_PASSWORD", _planetscale_pw, KEYED, False, True,
      "gitleaks planetscale-password"),
    K("pulumi", "PULUMI_ACCESS_TOKEN", prefixed("pul-", 40, HEX), KEYED, True, True, "gitleaks pulumi-api-token"),
    K("terraform_cloud", "TFE_TOKEN", _terraform, KEYED, False, True, "gitleaks hashicorp-tf-api-token"),
    K("doppler", "DOPPLER_TOKEN", prefixed("dp.st.", 43, B64URL), KEYED, False, True,
      "gitleaks doppler-api-token"),
    # --- secrets managers, registries, CI ---------------------------------------------------
    K("vault_service", "VAULT_TOKEN", prefixed("hvs.", 90, B64URL), TOKEN, True, True, "gitleaks vault-service-token"),
    K("vault_batch", "VAULT_TOKEN", prefixed("hvb.", 138, B64URL), KEYED, False, True, "gitleaks vault-batch-token"),
    K("npm_token", "NPM_TOKEN", prefixed("npm_", 36), TOKEN, True, True, "gitleaks npm-access-token"),
    K("npmrc_auth", "NPMRC", _npmrc, ("native",), True, True, "npmrc _authToken"),
    K("pypi_token", "PYPI_TOKEN", _pypi, TOKEN, True, True, "gitleaks pypi-upload-token"),
    K("docker_login", "DOCKER", _docker_login, ("native",), True, True, "docker login -p"),
    K("docker_config_auths", "DOCKER_CONFIG", _docker_config, BLOCK, True, True, "docker config.json auths"),
    K("age_secret_key", "SOPS_AGE_KEY", _age, KEYED + ("prose",), False, True, "gitleaks age-secret-key"),
    K("grafana_service_account", "GRAFANA_TOKEN", _grafana_sa, KEYED, False, True,
      "gitleaks grafana-service-account-token"),
    K("grafana_cloud", "GRAFANA_CLOUD_TOKEN", prefixed("glc_", 80, B64), KEYED, False, True,
      "gitleaks grafana-cloud-api-token"),
    K("sentry_org", "SENTRY_AUTH_TOKEN", _sentry_org, KEYED, False, True, "gitleaks sentry-org-token"),
    K("sentry_user", "SENTRY_AUTH_TOKEN", prefixed("sntryu_", 64, HEX), KEYED, True, True,
      "gitleaks sentry-user-token"),
    K("new_relic", "NEW_RELIC_API_KEY", prefixed("NRAK-", 27, UPPER), KEYED, False, True, "gitleaks new-relic-user-api-key"),
    K("datadog_api", "DD_API_KEY", _hex_key(32), KEYED, True, False, "gitleaks datadog-access-token (keyword)"),
    K("datadog_app", "DD_APP_KEY", _hex_key(40), KEYED, False, False, "keyword app_key"),
    K("postman", "POSTMAN_API_KEY", _postman, KEYED, False, True, "gitleaks postman-api-token"),
    K("atlassian", "JIRA_API_TOKEN", _atlassian, KEYED, True, True, "gitleaks atlassian-api-token"),
    K("linear", "LINEAR_API_KEY", prefixed("lin_api_", 40), KEYED, False, True, "gitleaks linear-api-key"),
    K("notion", "NOTION_TOKEN", prefixed("ntn_", 46), KEYED, False, True, "gitleaks notion-api-token"),
    K("okta_ssws", "OKTA", _ssws, ("native",), False, True, "Okta SSWS header"),
    # --- mail, messaging ------------------------------------------------------------------
    K("twilio_api_key", "TWILIO_API_KEY", prefixed("SK", 32, HEX), TOKEN, True, True, "gitleaks twilio-api-key"),
    K("twilio_auth_token", "TWILIO_AUTH_TOKEN", _hex_key(32), KEYED, True, False, "keyword auth_token"),
    K("sendgrid", "SENDGRID_API_KEY", _sendgrid, TOKEN, True, True, "gitleaks sendgrid-api-token"),
    K("mailgun", "MAILGUN_API_KEY", prefixed("key-", 32, HEX), TOKEN, True, True, "gitleaks mailgun-private-api-token"),
    K("mailchimp", "MAILCHIMP_API_KEY", prefixed("", 32, HEX, suffix="-us21"), KEYED, False, False,
      "gitleaks mailchimp-api-key"),
    K("facebook_token", "FB_ACCESS_TOKEN", _facebook, KEYED, False, True, "gitleaks facebook-access-token"),
    K("twitter_bearer", "TWITTER_BEARER_TOKEN", _twitter_bearer, KEYED + ("bearer",), False, True,
      "gitleaks twitter-bearer-token"),
    # --- generic: JWTs, private keys, headers, URLs, configs ---------------------------------
    K("jwt", "ID_TOKEN", _jwt, TOKEN, True, True, "gitleaks jwt"),
    K("jwt_rs256", "ACCESS_TOKEN", _jwt_rs, ("bearer", "bearer_caps", "json", "env"), False, True, "gitleaks jwt"),
    K("pem_rsa", "PRIVATE_KEY", _pem_multi("RSA PRIVATE KEY"), BLOCK, True, True, "gitleaks private-key"),
    K("pem_pkcs8", "PRIVATE_KEY", _pem_multi("PRIVATE KEY"), BLOCK, True, True, "gitleaks private-key"),
    K("pem_openssh", "SSH_KEY", _pem("OPENSSH PRIVATE KEY", head="b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtz\n"),
      BLOCK, True, True, "gitleaks private-key"),
    K("pem_ec", "EC_KEY", _pem_multi("EC PRIVATE KEY", 4), BLOCK, True, True, "gitleaks private-key"),
    K("pem_encrypted", "PRIVATE_KEY", _pem_multi("ENCRYPTED PRIVATE KEY"), BLOCK, False, True, "gitleaks private-key"),
    K("pgp_private", "PGP_KEY", _pem_multi("PGP PRIVATE KEY BLOCK", 10), BLOCK, False, True, "gitleaks private-key"),
    K("pem_body_headerless", "KEY", _pem_headerless, ("native",), True, True, "private key body without header"),
    K("kubeconfig_token", "KUBECONFIG", _kube_token, ("native",), True, True, "kubeconfig token:"),
    K("kubeconfig_client_key", "KUBECONFIG", _kube_client_key, ("native",), True, True,
      "gitleaks kubernetes-secret / client-key-data"),
    K("basic_auth", "AUTH", _basic_auth, ("native",), True, True, "detect-secrets BasicAuthDetector"),
    K("curl_user", "CURL", _curl_user, ("native",), True, True, "curl -u user:password"),
    K("url_https_password", "REPO_URL", _url(("https://", "git.example.org/shop/backend.git"), "deploy"), URL,
      True, True, "detect-secrets BasicAuthDetector (URL)"),
    K("url_password_pct", "REPO_URL", _url_pct, URL, True, True, "URL password with %40"),
    K("url_json_escaped", "REGISTRY_URL", _url_json_escaped, ("native",), True, True, "URL with \\/ escapes"),
    K("postgres_url", "DATABASE_URL", _url(("postgres://", "db.internal:5432/shop"), "app"), URL, True, True,
      "connection string"),
    K("postgresql_url", "DATABASE_URL", _url(("postgresql://", "pg.example.net:5432/shop?sslmode=require"), "admin"),
      URL, False, True, "connection string"),
    K("mysql_url", "DATABASE_URL", _url(("mysql://", "mysql.internal:3306/shop"), "root"), URL, True, True,
      "connection string"),
    K("mongodb_srv", "MONGODB_URI", _url(("mongodb+srv://", "cluster0.ab1cd.mongodb.net/shop?retryWrites=true"),
                                         "shopadmin"), URL, True, True, "gitleaks mongodb connection string"),
    K("redis_url", "REDIS_URL", _redis_nouser, URL, True, True, "connection string"),
    K("rediss_url", "REDIS_URL", _url(("rediss://", "cache.example.net:6380/0"), "default"), URL, False, True,
      "connection string"),
    K("amqp_url", "AMQP_URL", _url(("amqp://", "rabbit.internal:5672/shop"), "shop"), URL, False, True,
      "connection string"),
    K("jdbc_postgres", "JDBC_URL", _jdbc_pg, URL, True, True, "JDBC password="),
    K("jdbc_sqlserver", "JDBC_URL", _jdbc_sqlserver, URL, False, True, "JDBC password="),
    K("jdbc_mysql", "JDBC_URL", _jdbc_mysql, URL, False, True, "JDBC user:password@"),
    K("netrc", "NETRC", _netrc, ("native",), True, True, ".netrc password"),
    K("netrc_oneline", "NETRC", _netrc_oneline, ("native",), False, True, ".netrc password"),
    # --- keyed values without a shape of their own ------------------------------------------
    K("password_generic", "DB_PASSWORD", _pw(20), PASSWORD, True, False, "detect-secrets KeywordDetector"),
    K("password_mysql", "MYSQL_ROOT_PASSWORD", _pw(18, "!#%+-=_"), PASSWORD, True, False,
      "detect-secrets KeywordDetector"),
    K("api_key_generic", "API_KEY", _raw(32), KEYED, True, False, "gitleaks generic-api-key"),
    K("secret_key_django", "SECRET_KEY", _django_secret, KEYED, True, False, "gitleaks generic-api-key"),
    K("client_secret_generic", "CLIENT_SECRET", _raw(40, B64URL), KEYED, True, False, "gitleaks generic-api-key"),
    K("access_token_generic", "ACCESS_TOKEN", _raw(36, B64URL), KEYED + ("bearer", "bearer_caps"), True, False,
      "gitleaks generic-api-key"),
    K("auth_token_generic", "AUTH_TOKEN", _raw(30), KEYED + ("x_api_key",), False, False,
      "gitleaks generic-api-key"),
    K("private_token_generic", "PRIVATE_TOKEN", _raw(26), KEYED, False, False, "gitleaks generic-api-key"),
    K("bearer_opaque", "TOKEN", _raw(40, B64URL), ("bearer", "bearer_caps"), True, False, "bearer header"),
    K("email_address", "EMAIL", _email, ("prose", "env", "json"), False, True, "contract: e-mail addresses"),
]

# The fast form leaves these to the long form: each has a sibling of the same
# shape family in the CI set.
_LONG_ONLY = {"github_app_server", "stripe_webhook", "groq", "anthropic_admin", "sentry_user", "pulumi",
              "supabase", "heroku_new", "mysql_url", "secret_key_django", "client_secret_generic",
              "gcp_oauth_client_secret"}
KINDS = [Kind(**{**k.__dict__, "ci": k.ci and k.name not in _LONG_ONLY}) for k in KINDS]

BY_NAME = {k.name: k for k in KINDS}
assert len(BY_NAME) == len(KINDS), "kind names are unique"

# Obvious placeholders: they must stay readable and searchable.
PLACEHOLDERS: list[str] = [
    "OPENAI_API_KEY=your-api-key-here",
    'export API_KEY="${API_KEY}"',
    "Authorization: Bearer <token>",
    "password: xxxxxxxx",
    "GITHUB_TOKEN=YOUR_TOKEN_HERE",
    '{"api_key": "<your-api-key>"}',
    "DB_PASSWORD=${DB_PASSWORD}",
    "token: {{ secrets.NPM_TOKEN }}",
]
# The pieces of each placeholder that must be found verbatim in what is returned.
PLACEHOLDER_PIECES: list[str] = [
    "your-api-key-here", "${API_KEY}", "<token>", "xxxxxxxx", "YOUR_TOKEN_HERE", "<your-api-key>",
    "${DB_PASSWORD}", "{{ secrets.NPM_TOKEN }}",
]


def kinds(full: bool) -> list[Kind]:
    return list(KINDS) if full else [k for k in KINDS if k.ci]
