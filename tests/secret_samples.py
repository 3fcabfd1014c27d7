"""The one table of secret samples the tests plant: (kind, the text to plant,
the secret's body: what must never be stored or shown). Several per kind
for the kinds of the first redactor, written here; one per kind added since,
the first example of its row in the redactor's table (`test_redact` plants
every example of every row in every syntax). `SECRETS` is the first sample of
each kind. The bodies are random but fixed (a seeded generator)."""

from __future__ import annotations

import random
import string

from session_recall.text.redact import TABLE

_rng = random.Random(20261201)


def _body(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    """A random, distinctive secret body (deterministic)."""
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _sample(kind: str, template: str, body: str) -> tuple[str, str, str]:
    return kind, template.format(body), body


_B64 = string.ascii_letters + string.digits + "+/"
# (kind, the text to plant, the secret's body: what must never be stored)
SAMPLES: list[tuple[str, str, str]] = [
    _sample("private_key", "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----", _body(64, _B64)),
    _sample("private_key", "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----",
            _body(48, _B64)),
    _sample("private_key", "-----BEGIN EC PRIVATE KEY-----\n{}", _body(40, _B64)),  # cut off before its END
    _sample("bearer", "Authorization: Bearer {}", _body(28) + "7"),
    _sample("bearer", "curl -H 'authorization: bearer {}'", _body(20) + "3"),
    _sample("anthropic_key", "sk-ant-api03-{}", _body(24)),
    _sample("stripe_key", "sk_live_{}", _body(24)),
    _sample("stripe_key", "rk_live_{}", _body(20)),
    _sample("openai_key", "sk-proj-{}", _body(24)),
    _sample("openai_key", "sk-svcacct-{}", _body(20)),
    _sample("openai_key", "sk-{}", _body(32)),
    _sample("github_token", "ghp_{}", _body(36)),
    _sample("github_token", "gho_{}", _body(36)),
    _sample("github_token", "github_pat_{}", _body(40)),
    _sample("aws_key", "AKIA{}", _body(16, string.ascii_uppercase + string.digits)),
    _sample("aws_key", "ASIA{}", _body(16, string.ascii_uppercase + string.digits)),
    _sample("slack_token", "xoxb-{}", "1234-" + _body(20)),
    _sample("slack_token", "xoxp-{}", _body(24)),
    _sample("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ{}", "hZGEifQ." + _body(30)),
    _sample("url_password", "https://deploy:{}@git.example.org/repo.git", _body(14)),
    _sample("url_password", "postgres://admin:{}@db.internal:5432/shop", _body(16)),
    _sample("password", "password={}", _body(14)),
    _sample("secret_value", "api_key={}", _body(20)),
    _sample("password", "PASSWD={}", _body(12)),
    _sample("secret_value", "token={}&next=1", _body(18)),
    _sample("email", "{}@example.com", "zeb." + _body(10, string.ascii_lowercase)),
    _sample("email", "ops+{}@mail.example.co.uk", _body(12, string.ascii_lowercase)),
]

# The kinds added with redactor version 2, from the redactor's table (each
# kind's first example; the table's own tests plant every example in every
# syntax).
_HAVE = {k for k, _, _ in SAMPLES}
SAMPLES += [(k.name, *k.examples[0]) for k in TABLE if k.examples and k.name not in _HAVE and not _HAVE.add(k.name)]


SECRETS: dict[str, tuple[str, str]] = {}
for _kind, _text, _secret in SAMPLES:
    SECRETS.setdefault(_kind, (_text, _secret))


# Shapes taken from outside the redactor (gitleaks' rules for RubyGems,
# Clojars, GitLab's job, feed and runner tokens and Azure AD client secrets;
# the documented formats of crates.io and NuGet keys; the syntaxes PHP, Ruby,
# Go, XML configs, SQL, PowerShell, mysql and curl write credentials in),
# each in a sentence that holds no other trigger of its kind. Redactor
# version 2 stored every one of them (the last rows: version 3). (text, the secret)
_HEX = "0123456789abcdef"
_LOW = string.ascii_lowercase + string.digits


def _outside(template: str, body: str) -> tuple[str, str]:
    return template.format(body), body


OUTSIDE: list[tuple[str, str]] = [
    _outside("published the gem with rubygems_{} yesterday", _body(48, _HEX)),
    _outside("cargo login cio{}", _body(32)),
    _outside("dotnet nuget push pkg.nupkg -k oy2{} -s nuget.org", _body(43, _LOW)),
    _outside("deploying with CLOJARS_{} now", _body(60)),
    _outside("the job ran with glcbt-64_{} today", _body(20)),
    _outside("the feed link carries glft-{} as well", _body(20)),
    _outside("the runner was registered with GR1348941{} once", _body(20)),
    _outside("the app got tUx8Q~{} from az", _body(34)),
    _outside("'password' => '{}',", _body(16)),
    _outside('"api_key" => "{}",', _body(24)),
    _outside('password := "{}"', _body(16)),
    _outside("<server><id>nexus</id><password>{}</password></server>", _body(16)),
    _outside('<add key="ClearTextPassword" value="{}" />', _body(16)),
    _outside('os.environ["OPENAI_API_KEY"] = "{}"', _body(32)),
    _outside("mysql -u root -p'{}' shop", _body(16)),
    _outside("curl --user=ada:{} https://api.example.org", _body(16)),
    _outside("curl -uada:{} https://api.example.org", _body(16)),
    _outside("sshpass -p{} ssh deploy@host", _body(16)),
    _outside("CREATE USER app IDENTIFIED BY '{}';", _body(16)),
    _outside("ALTER ROLE app WITH PASSWORD '{}';", _body(16)),
    _outside('$cred = ConvertTo-SecureString "{}" -AsPlainText -Force', _body(16)),
    _outside('{{"Authorization": ["Basic {}"]}}', _body(32, _B64)),
    # Redactor version 3 stored these (shapes of gitleaks' and trufflehog's
    # rules, and the syntaxes of the tools named; a review's outside probe
    # found them): provider heads it did not know, camel-case and short
    # password keys, typed declarations, ODBC braces, calls and command lines
    # that take a password, cookies, presigned URLs, webhooks.
    _outside("the new token dckr_oat_{} works", _body(32)),
    _outside("PINECONE_API=pcsk_{}", _body(40)),
    _outside("langsmith said lsv2_pt_{}", _body(40)),
    _outside("join with tskey-auth-{}", _body(24)),
    _outside("dbPass: '{}'", _body(16)),
    _outside("adminPwd={}", _body(16)),
    _outside("DB_PW={}", _body(16)),
    _outside('db_password: str = "{}"', _body(16)),
    _outside("Server=db;UID=sa;PWD={{{};}};", _body(16)),
    _outside('requests.get(url, auth=("ada", "{}"))', _body(16)),
    _outside("openssl rsa -in k.pem -passin pass:{} -out k2.pem", _body(16)),
    _outside("redis-cli -h cache -a {} ping", _body(16)),
    _outside("< Set-Cookie: sessionid={}; Path=/", _body(32, _LOW)),
    _outside("https://b.s3.amazonaws.com/k?X-Amz-Signature={}", _body(64, _HEX)),
    _outside("https://acme.webhook.office.com/webhookb2/a@b/IncomingWebhook/{}/1c2d3e4f-5a6b-7c8d-9e0f-a1b2c3d4e5f6",
             _body(32, _HEX)),
    # Redactor version 4 stored these (a probe built from 220 of gitleaks'
    # rules and 44 of trufflehog's detectors stored 164 of its 436 cases;
    # version 5, 7): a provider's name as the key, provider heads it did not
    # know, bodies holding dots, `=` or `@`, keys named `_access` or `_api`,
    # and the syntaxes of the tools named.
    _outside("datadog_thing := '{}'", _body(40, _LOW)),
    _outside("cloudflare = {}", _body(37, _LOW)),
    _outside("MY_HEROKU: {}-4c2d-9e0f-a1b2c3d4e5f6", _body(8, _HEX)),
    _outside("sendbirdToken => \"{}\"", _body(40, _HEX)),
    _outside('stripe_access = "{}"', _body(24)),
    _outside("stripe:\n  live:\n    api: {}\n", _body(24)),
    _outside("the new one is glpat-{}.01uwgl0rz", _body(27)),
    _outside("infracost: ico-{}", _body(32)),
    _outside("the key SG.{} works", _body(66, _LOW + "=_-.")),
    _outside("PSCALE=pscale_tkn_{}.qLlP9jay-_vo-", _body(32)),
    _outside("notion secret_{}", _body(43)),
    _outside("harness pat.{}.0123456789abcdefABCDEF01.dJYlGgl4uSIvd2oRFujL", _body(22)),
    _outside("mailchimp {}-us12", _body(32, _HEX)),
    _outside('<add key="Password"value="{}"/>', _body(24)),
    _outside("$ cat ~/.pgpass\ndb.internal:5432:shop:app:{}", _body(16)),
    _outside('Set o = dso.OpenDSObject("LDAP://dc.corp/DC=corp", "CORP\\svc", "{}", 1)', _body(16)),
    _outside("ldapmodify -x -D cn=admin,dc=corp -w '{}' -f a.ldif", _body(16)),
    _outside('variable "api_token" {{\n  default = "{}"\n}}', _body(16)),
    _outside("      - name: REDIS_PASSWORD\n        value: {}\n", _body(16)),
    _outside("Driver={{ODBC Driver 18}};PWD={{{}!x}};", _body(16)),
    _outside("token ewogICJhbGciOiAiUlMyNTYiCn0.ewogICJzdWIiOiAiYWRhIgp9.{}", _body(32)),
    # Redactor version 5 stored these (shapes of gitleaks' Facebook access
    # token and trufflehog's Zoho and Gemini detectors; version 6).
    _outside("FB.api('/me', {{token: '5787803457532702|{}'}})", _body(32, _HEX)),
    _outside("GET /debug_token?input_token=477694365976971%7C{} HTTP/1.1", _body(29, _LOW + "-_")),
    _outside("zoho crm refresh 1000.{}", _body(32, _HEX) + "." + _body(32, _HEX)),
    _outside("exchange key master-{} for the bot", _body(20)),
    _outside("exchange key account-{} for the bot", _body(20)),
]
