"""A blind held-out corpus of secrets, written without reading the redaction rules or the other corpora.

Why a second corpus: a corpus written by whoever tuned the detector measures the detector's memory of
its own tests. These shapes come from the formats providers document and the places developers paste
them (env lines, JSON bodies, headers, URLs, sentences, code). Every value is made up by a seeded
generator: no live credential is here, and the corpus is the same on every run.

`SECRETS`: each `needles` part must never be at rest. `KEPT`: text that looks random but that the user
needs; each `needles` part must survive recording unchanged.
"""

from __future__ import annotations

import base64
import random
import string
from dataclasses import dataclass

_SEED = 20261204
_rng = random.Random(_SEED)

_ALNUM = string.ascii_letters + string.digits
_UPPER_ALNUM = string.ascii_uppercase + string.digits
_LOWER_ALNUM = string.ascii_lowercase + string.digits
_HEX = "0123456789abcdef"
_B64 = string.ascii_letters + string.digits + "+/"
_B64URL = string.ascii_letters + string.digits + "-_"


@dataclass(frozen=True)
class Shape:
    """One pasted text: `needles` are the parts a redactor must remove (secrets) or keep (kept)."""

    name: str
    kind: str
    text: str
    needles: tuple[str, ...]


def _pick(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _digits(n: int) -> str:
    return _pick(string.digits, n)


def _uuid() -> str:
    h = _pick(_HEX, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


def _b64_lines(n_bytes: int, width: int = 64) -> list[str]:
    raw = bytes(_rng.randrange(256) for _ in range(n_bytes))
    body = base64.b64encode(raw).decode()
    return [body[i : i + width] for i in range(0, len(body), width)]


def _iban(country: str, bban: str) -> str:
    """An IBAN whose mod-97 check digits are right, as a real one's are."""
    rearranged = bban + country + "00"
    number = int("".join(str(int(c, 36)) for c in rearranged))
    check = 98 - number % 97
    return f"{country}{check:02d}{bban}"


def _luhn(prefix: str, length: int) -> str:
    body = prefix + _digits(length - len(prefix) - 1)
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return body + str((10 - total % 10) % 10)


def _cpf() -> str:
    base = [int(c) for c in _digits(9)]
    for _ in range(2):
        weight = len(base) + 1
        s = sum(d * (weight - i) for i, d in enumerate(base))
        r = s * 10 % 11
        base.append(0 if r == 10 else r)
    d = "".join(map(str, base))
    return f"{d[:3]}.{d[3:6]}.{d[6:9]}-{d[9:]}"


def _dni() -> str:
    n = int(_digits(8))
    return f"{n:08d}{'TRWAGMYFPDXBNJZSQVHLCKE'[n % 23]}"


def _ssn() -> str:
    area = _rng.randrange(1, 665)
    return f"{area:03d}-{_rng.randrange(1, 100):02d}-{_rng.randrange(1, 10000):04d}"


def _nino() -> str:
    letters = "ABCEGHJKLMNPRSTWXYZ"
    return f"{_rng.choice(letters)}{_rng.choice(letters)} {_digits(2)} {_digits(2)} {_digits(2)} {_rng.choice('ABCD')}"


def _jwt() -> str:
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=").decode()
    claims = f'{{"sub":"{_digits(8)}","name":"Ada","iat":{1700000000 + _rng.randrange(10**7)}}}'
    payload = base64.urlsafe_b64encode(claims.encode()).rstrip(b"=").decode()
    return f"{header}.{payload}.{_pick(_B64URL, 43)}"


def _secrets() -> list[Shape]:
    out: list[Shape] = []

    def add(name: str, kind: str, text: str, *needles: str) -> None:
        out.append(Shape(name, kind, text, tuple(needles)))

    # payment
    v = "sk_live_" + _pick(_ALNUM, 24)
    add("stripe_secret_env", "payment", f"STRIPE_SECRET_KEY={v}\nSTRIPE_MODE=live", v)
    v = "rk_live_" + _pick(_ALNUM, 99)
    add("stripe_restricted_json", "payment", f'{{"name": "reporting", "key": "{v}"}}', v)
    v = "whsec_" + _pick(_ALNUM, 32)
    add("stripe_webhook_secret", "payment", f"endpoint secret for the webhook is {v}, keep it handy", v)
    v = f"access_token$production${_pick(_LOWER_ALNUM, 16)}${_pick(_HEX, 32)}"
    add("braintree_access_token", "payment", f'gateway = braintree.BraintreeGateway(access_token="{v}")', v)
    v = "sq0atp-" + _pick(_B64URL, 22)
    add(
        "square_access_token",
        "payment",
        f"curl -H 'Authorization: Bearer {v}' https://connect.squareup.com/v2/payments",
        v,
    )
    v = "shpat_" + _pick(_HEX, 32)
    add("shopify_admin_token", "payment", f"X-Shopify-Access-Token: {v}", v)
    # version control and CI
    v = "ghp_" + _pick(_ALNUM, 36)
    add("github_classic_pat", "ci", f"git clone https://{v}@github.com/acme/infra.git", v)
    v = f"github_pat_{_pick(_ALNUM, 22)}_{_pick(_ALNUM, 59)}"
    add("github_fine_grained_pat", "ci", f"export GH_TOKEN={v}", v)
    v = "glpat-" + _pick(_B64URL, 20)
    add("gitlab_pat", "ci", f"PRIVATE-TOKEN: {v}\nAccept: application/json", v)
    v = f"CCIPAT_{_pick(_ALNUM, 22)}_{_pick(_HEX, 40)}"
    add("circleci_personal_token", "ci", f"circleci setup --token {v}", v)
    v = f"{_pick(_ALNUM, 14)}.atlasv1.{_pick(_ALNUM, 67)}"
    add("terraform_cloud_token", "ci", f'credentials "app.terraform.io" {{\n  token = "{v}"\n}}', v)
    # chat and email
    v = f"xoxb-{_digits(12)}-{_digits(13)}-{_pick(_ALNUM, 24)}"
    add("slack_bot_token", "chat", f'{{"ok": true, "access_token": "{v}", "team": "acme"}}', v)
    tail = _pick(_ALNUM, 24)
    v = f"https://hooks.slack.com/services/T{_pick(_UPPER_ALNUM, 10)}/B{_pick(_UPPER_ALNUM, 10)}/{tail}"
    add("slack_webhook_url", "webhook", f"post alerts to {v} please", tail)
    tail = _pick(_B64URL, 68)
    v = f"https://discord.com/api/webhooks/{_digits(18)}/{tail}"
    add("discord_webhook_url", "webhook", f'DISCORD_WEBHOOK="{v}"', tail)
    v = f"{_digits(10)}:AA{_pick(_B64URL, 33)}"
    add("telegram_bot_token", "chat", f"bot = telebot.TeleBot('{v}')", v)
    v = f"SG.{_pick(_B64URL, 22)}.{_pick(_B64URL, 43)}"
    add("sendgrid_api_key", "email", f"SENDGRID_API_KEY={v}", v)
    v = "key-" + _pick(_HEX, 32)
    add("mailgun_api_key", "email", f"curl -s --user 'api:{v}' https://api.mailgun.net/v3/mg.acme.io/messages", v)
    v = _uuid()
    add("postmark_server_token", "email", f"X-Postmark-Server-Token: {v}", v)
    sid, tok = "AC" + _pick(_HEX, 32), _pick(_HEX, 32)
    add("twilio_auth_token", "chat", f"client = Client('{sid}', '{tok}')", tok)
    # monitoring
    v = _pick(_HEX, 32)
    add("datadog_api_key", "monitoring", f"DD_API_KEY={v}\nDD_SITE=datadoghq.eu", v)
    v = "NRAK-" + _pick(_UPPER_ALNUM, 27)
    add("newrelic_user_key", "monitoring", f'{{"headers": {{"API-Key": "{v}"}}}}', v)
    key = _pick(_HEX, 32)
    v = f"https://{key}@o{_digits(6)}.ingest.sentry.io/{_digits(7)}"
    add("sentry_dsn", "monitoring", f'sentry_sdk.init(dsn="{v}")', key)
    v = "glsa_" + _pick(_ALNUM, 32) + "_" + _pick(_HEX, 8)
    add("grafana_service_account", "monitoring", f"Authorization: Bearer {v}", v)
    # issue trackers, docs and design tools
    v = "ATATT3xFfGF0" + _pick(_B64URL, 180) + "=" + _pick(_UPPER_ALNUM, 8)
    add("atlassian_api_token", "saas", f"JIRA_API_TOKEN={v}", v)
    v = "lin_api_" + _pick(_ALNUM, 40)
    add("linear_api_key", "saas", f'const linear = new LinearClient({{ apiKey: "{v}" }})', v)
    v = "ntn_" + _pick(_ALNUM, 46)
    add("notion_integration_secret", "saas", f"my notion integration secret: {v}", v)
    v = f"figd_{_pick(_B64URL, 40)}"
    add("figma_pat", "saas", f"X-Figma-Token: {v}", v)
    # hosting and registries
    v = _uuid()
    add("heroku_api_key", "hosting", f"HEROKU_API_KEY={v}", v)
    v = _pick(_ALNUM, 24)
    add("vercel_token", "hosting", f"vercel deploy --prod --token={v}", v)
    v = "dop_v1_" + _pick(_HEX, 64)
    add("digitalocean_pat", "hosting", f'{{"do_token": "{v}"}}', v)
    v = "nfp_" + _pick(_ALNUM, 36)
    add("netlify_pat", "hosting", f"NETLIFY_AUTH_TOKEN={v}", v)
    v = _pick(_B64URL, 40)
    add("cloudflare_api_token", "hosting", f"CLOUDFLARE_API_TOKEN={v}", v)
    v = "npm_" + _pick(_ALNUM, 36)
    add("npm_token_npmrc", "registry", f"//registry.npmjs.org/:_authToken={v}", v)
    v = "pypi-AgEIcHlwaS5vcmc" + _pick(_B64URL, 150)
    add("pypi_upload_token", "registry", f"[pypi]\nusername = __token__\npassword = {v}", v)
    v = "dckr_pat_" + _pick(_B64URL, 27)
    add("dockerhub_pat", "registry", f"echo {v} | docker login -u acme --password-stdin", v)
    # AI APIs
    v = "sk-proj-" + _pick(_B64URL, 156)
    add("openai_project_key", "ai", f"OPENAI_API_KEY={v}", v)
    v = "sk-ant-api03-" + _pick(_B64URL, 93) + "AA"
    add("anthropic_api_key", "ai", f'{{"x-api-key": "{v}", "anthropic-version": "2023-06-01"}}', v)
    v = "hf_" + _pick(string.ascii_letters, 34)
    add("huggingface_token", "ai", f"huggingface-cli login --token {v}", v)
    v = _pick(_ALNUM, 32)
    add("cohere_api_key_prose", "ai", f"use this cohere api key {v} for the embeddings job", v)
    # clouds
    kid, sec = "AKIA" + _pick(_UPPER_ALNUM, 16), _pick(_B64, 40)
    add(
        "aws_credentials_file",
        "cloud",
        f"[default]\naws_access_key_id = {kid}\naws_secret_access_key = {sec}\nregion = eu-west-1",
        kid,
        sec,
    )
    kid, sec = "LTAI" + _pick(_ALNUM, 20), _pick(_ALNUM, 30)
    add(
        "alibaba_access_key",
        "cloud",
        f"ALIBABA_CLOUD_ACCESS_KEY_ID={kid}\nALIBABA_CLOUD_ACCESS_KEY_SECRET={sec}",
        kid,
        sec,
    )
    v = "AIza" + _pick(_B64URL, 35)
    add("google_api_key_url", "cloud", f"https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key={v}", v)
    pem = "\\n".join(_b64_lines(600))
    kid = _pick(_HEX, 40)
    sa = (
        '{"type": "service_account", "project_id": "acme-prod", '
        f'"private_key_id": "{kid}", '
        f'"private_key": "-----BEGIN PRIVATE KEY-----\\n{pem}\\n-----END PRIVATE KEY-----\\n", '
        '"client_email": "deploy@acme-prod.iam.gserviceaccount.com"}'
    )
    add("gcp_service_account_json", "cloud", sa, kid, pem.split("\\n")[3])
    v = _pick(_B64, 86) + "=="
    add(
        "azure_storage_connection_string",
        "cloud",
        f"DefaultEndpointsProtocol=https;AccountName=acmeprod;AccountKey={v};EndpointSuffix=core.windows.net",
        v,
    )
    v = _pick(_ALNUM, 3) + "8Q~" + _pick(_ALNUM + "~._-", 34)
    add("azure_client_secret", "cloud", f"AZURE_CLIENT_ID={_uuid()}\nAZURE_CLIENT_SECRET={v}", v)
    v = "GOCSPX-" + _pick(_B64URL, 28)
    add(
        "google_oauth_client_secret",
        "oauth",
        f'{{"web": {{"client_id": "{_digits(12)}-x.apps.googleusercontent.com", "client_secret": "{v}"}}}}',
        v,
    )
    v = _pick(_ALNUM, 40)
    add("oauth_token_request_body", "oauth", f"grant_type=client_credentials&client_id=acme-app&client_secret={v}", v)
    # database URLs
    pw = _pick(_ALNUM, 18)
    add("postgres_url", "database", f"DATABASE_URL=postgres://app_user:{pw}@db.acme.internal:5432/orders", pw)
    pw = _pick(_ALNUM, 16)
    add(
        "mongodb_srv_url",
        "database",
        f'client = MongoClient("mongodb+srv://admin:{pw}@cluster0.ab1cd.mongodb.net/shop")',
        pw,
    )
    pw = _pick(_ALNUM, 24)
    add("redis_url", "database", f"REDIS_URL=redis://:{pw}@cache.acme.io:6380/0", pw)
    pw = _pick(_ALNUM, 14) + "!"
    add("mysql_dsn_code", "database", f'engine = create_engine("mysql+pymysql://root:{pw}@10.0.3.7/crm")', pw)
    # private keys in several containers
    lines = _b64_lines(900)
    add(
        "rsa_private_key_pem",
        "private_key",
        "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END RSA PRIVATE KEY-----",
        lines[2],
        lines[7],
    )
    lines = ["b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW", *_b64_lines(300, 70)]
    add(
        "openssh_private_key",
        "private_key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END OPENSSH PRIVATE KEY-----",
        lines[2],
    )
    lines = _b64_lines(800)
    add(
        "pkcs8_encrypted_key",
        "private_key",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END ENCRYPTED PRIVATE KEY-----",
        lines[3],
    )
    lines = _b64_lines(700)
    add(
        "pgp_private_key_block",
        "private_key",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n" + "\n".join(lines) + "\n=Ab3x\n-----END PGP PRIVATE KEY BLOCK-----",
        lines[4],
    )
    priv = _b64_lines(48)[0]
    mac = _pick(_HEX, 64)
    add(
        "putty_ppk",
        "private_key",
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: ada@laptop\nPublic-Lines: 2\n"
        f"AAAAC3NzaC1lZDI1NTE5AAAAI{_pick(_B64, 43)}\nPrivate-Lines: 1\n{priv}\nPrivate-MAC: {mac}",
        priv,
    )
    d = _pick(_B64URL, 43)
    add(
        "jwk_private_key",
        "private_key",
        f'{{"kty": "EC", "crv": "P-256", "x": "{_pick(_B64URL, 43)}", "y": "{_pick(_B64URL, 43)}", "d": "{d}"}}',
        d,
    )
    v = "AGE-SECRET-KEY-1" + _pick("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)
    add("age_secret_key", "private_key", f"# created: 2026-12-01\n# public key: age1{_pick(_LOWER_ALNUM, 58)}\n{v}", v)
    # sessions, bearer, links
    sid, csrf = _pick(_LOWER_ALNUM, 32), _pick(_ALNUM, 64)
    add("django_session_cookie", "session", f"Cookie: sessionid={sid}; csrftoken={csrf}; theme=dark", sid)
    v = "s%3A" + _pick(_B64URL, 32) + "." + _pick(_B64URL, 43)
    add("express_set_cookie", "session", f"Set-Cookie: connect.sid={v}; Path=/; HttpOnly", v)
    v = _jwt()
    add("bearer_jwt_header", "session", f"Authorization: Bearer {v}", v.split(".")[2])
    v = _pick(_B64URL, 43)
    add("magic_link_t", "link", f"Sign in to Acme: https://app.acme.io/auth/magic?t={v}", v)
    v = _pick(_B64URL, 32)
    add("reset_link_k", "link", f"Reset your password here https://acme.io/password/reset?k={v}&u=ada", v)
    user, pw = "deploy", _pick(_ALNUM, 20)
    basic = base64.b64encode(f"{user}:{pw}".encode()).decode()
    add("basic_auth_header", "session", f"Authorization: Basic {basic}", basic)
    pw = _pick(_ALNUM, 16)
    add("basic_auth_in_url", "session", f"pip install --index-url https://ci:{pw}@pypi.acme.io/simple/ acme-sdk", pw)
    # identity and bank numbers
    v = _iban("DE", _digits(18))
    add("iban_de", "identity", f"Please wire the deposit to IBAN {v} before Friday.", v)
    v = _iban("GB", "NWBK" + _digits(14))
    add("iban_gb_json", "identity", f'{{"payee": "Ada Lovelace", "iban": "{v}"}}', v)
    v = _iban("FR", _digits(23))
    spaced = " ".join(v[i : i + 4] for i in range(0, len(v), 4))
    add("iban_fr_spaced", "identity", f"mon RIB: {spaced}", spaced)
    v = _luhn("4", 16)
    spaced = " ".join(v[i : i + 4] for i in range(0, 16, 4))
    add("visa_card_spaced", "identity", f"card number {spaced} exp 09/29 cvc {_digits(3)}", spaced)
    v = _luhn("51", 16)
    add("mastercard_json", "identity", f'{{"number": "{v}", "exp_month": 11, "exp_year": 2028}}', v)
    v = _ssn()
    add("us_ssn_prose", "identity", f"my SSN is {v} if the form asks", v)
    v = _nino()
    add("uk_nino", "identity", f"National Insurance number: {v}", v)
    v = _cpf()
    add("brazil_cpf", "identity", f"CPF do titular: {v}", v)
    v = _dni()
    add("spain_dni", "identity", f"DNI {v} (titular de la reserva)", v)
    # passwords in prose
    v = _pick(_ALNUM, 10) + "#" + _digits(2)
    add("password_prose", "password", f"my password is {v} and the username is ada", v)
    v = "correct-horse-" + _pick(string.ascii_lowercase, 8)
    add("passphrase_prose", "password", f"The wifi passphrase: {v}", v)
    v = _pick(_ALNUM, 12)
    add("password_yaml", "password", f"database:\n  user: app\n  password: {v}\n  host: db", v)
    v = _pick(_ALNUM, 15) + "$"
    add("password_cli_flag", "password", f"mysql -u root --password={v} -h 127.0.0.1", v)
    return out


def _kept() -> list[Shape]:
    out: list[Shape] = []

    def add(name: str, kind: str, text: str, *needles: str) -> None:
        out.append(Shape(name, kind, text, tuple(needles)))

    v = _pick(_HEX, 40)
    add("git_commit_prose", "hash", f"The regression came in with commit {v}; revert it.", v)
    v = _pick(_HEX, 7)
    add("git_short_hash", "hash", f"cherry-pick {v} onto release/2.3", v)
    v = _uuid()
    add("order_uuid", "order", f"Your order {v} has shipped.", v)
    v = _uuid()
    add("order_uuid_url", "order", f"https://shop.example.com/orders/{v}/invoice", v)
    v = "css-" + _pick(_LOWER_ALNUM, 7)
    add("css_class_hash", "css", f'<button class="{v} btn-primary">Checkout</button>', v)
    v = "_" + _pick(_ALNUM, 5) + "_" + _pick(_LOWER_ALNUM, 5)
    add("css_module_class", "css", f"click the element with selector .{v}", v)
    v = f"main.{_pick(_HEX, 8)}.chunk.js"
    add("webpack_chunk", "css", f"<script src=/static/js/{v}></script>", v)
    v = f"IMG_{_digits(8)}_{_digits(6)}.jpg"
    add("image_file_name", "image", f"uploaded {v} to the listing", v)
    v = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    add("data_uri_image", "image", f'<img alt="dot" src="{v}">', v)
    add("isbn13", "book", "ISBN 978-0-262-03384-8 is the third edition.", "978-0-262-03384-8")
    add("ups_tracking", "tracking", "UPS tracking number 1Z999AA10123456784, expected Tuesday", "1Z999AA10123456784")
    v = "9400" + _digits(18)
    add("usps_tracking", "tracking", f"USPS tracking: {v}", v)
    add(
        "version_semver",
        "version",
        "upgrade to 2.31.4-rc.1+build.20241203 before the demo",
        "2.31.4-rc.1+build.20241203",
    )
    v = "sha256:" + _pick(_HEX, 64)
    add("docker_digest", "hash", f"image: ghcr.io/acme/api@{v}", v)
    v = "sha512-" + _pick(_B64, 86) + "=="
    add("npm_integrity", "hash", f'"integrity": "{v}"', v)
    add("invoice_number", "order", "Invoice INV-2024-004312 is overdue.", "INV-2024-004312")
    v = _pick(string.ascii_uppercase, 6)
    add("booking_reference", "order", f"Booking reference {v}, seat 14C.", v)
    add("amazon_asin", "order", "ASIN B08N5WRWNW is out of stock", "B08N5WRWNW")
    add("youtube_id", "url", "watch https://www.youtube.com/watch?v=dQw4w9WgXcQ for the walkthrough", "dQw4w9WgXcQ")
    v = "----WebKitFormBoundary" + _pick(_ALNUM, 16)
    add("multipart_boundary", "http", f"Content-Type: multipart/form-data; boundary={v}", v)
    v = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + _pick(_B64, 43)
    add("ssh_public_key", "key", f"add this public key to authorized_keys: {v} ada@laptop", v)
    add(
        "aws_arn",
        "cloud",
        "assume arn:aws:iam::123456789012:role/deploy-readonly",
        "arn:aws:iam::123456789012:role/deploy-readonly",
    )
    add("jira_issue_key", "order", "see PROJ-1234 and OPS-77 for context", "PROJ-1234")
    add("mac_address", "network", "the printer is 3c:22:fb:9a:10:7e on vlan 20", "3c:22:fb:9a:10:7e")
    add("hex_color", "css", "use #3fa9f5 for the primary button", "#3fa9f5")
    add("iso_timestamp", "time", "logged at 2026-12-04T21:20:15.123456Z", "2026-12-04T21:20:15.123456Z")
    v = _digits(12)
    add("parcel_reference", "tracking", f"DHL parcel {v} is at the depot", v)
    return out


SECRETS: tuple[Shape, ...] = tuple(_secrets())
KEPT: tuple[Shape, ...] = tuple(_kept())
