"""Secret shapes for the at-rest tests: each a text as it would appear, and the needles (the secret
parts) that must never be found in any byte memtape writes.

Every value is made up here (none is a live credential); each is distinct, so a hit names its shape.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from tests.held_out_secrets import CAUGHT

ZW = "\u200b"  # zero-width space


@dataclass(frozen=True)
class Shape:
    name: str
    text: str
    needles: tuple[str, ...]


def luhn_complete(digits: str) -> str:
    """`digits` with the check digit that makes the Luhn sum a multiple of 10."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return digits + str((10 - total % 10) % 10)


def _shape(name: str, text: str, *needles: str) -> Shape:
    return Shape(name, text, needles or (text,))


OPENAI = "sk-proj-Q7vXk2LmN9pR4tW8zB3cD6fH1jK5"
ANTHROPIC = "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"
AWS_ID = "AKIAQ3EGRZ7XH2MNB5KW"
AWS_SECRET = "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"
GITHUB = "ghp_R8tY2uI4oP6aS8dF0gH2jK4lZ6xC8vB0nM1"
SPLIT_KEY = "sk-" + ZW + "live4Vq9Wx2Yz7Ab1Cd5Ef8Gh"
BASIC = base64.b64encode(b"admin:S3cr3t-Pa55-basic").decode()
VISA = luhn_complete("453914880343646")
MASTERCARD = luhn_complete("555555555555444")
AMEX = luhn_complete("37828224631000")
LOGIN_PASSWORD = "plum-Orbit-4417"
DOTTED_CARD = luhn_complete("401288888888188")
#: typed into fields named as secret fields, with `sensitive` left False (the door must see it by the field)
FIELD_SECRETS: dict[str, str] = {
    "Password": "Slate-Comet-8842",
    "PIN": "58173926",
    "One-time code": "40291376",
    "Card number": luhn_complete("411111111111111"),
    "API token": "tk-Rv5Wq2Zm8Ln3",
}

SHAPES: tuple[Shape, ...] = (
    _shape("OpenAI project key", OPENAI),
    _shape("Anthropic key", ANTHROPIC),
    _shape("OpenAI legacy key", "sk-T3BlbkFJ4f8Gh2Jk6Lm0Np4Qr8St2Vw6"),
    _shape("AWS access key id", AWS_ID),
    _shape("AWS temporary key id", "ASIAY4KJ2M7NQ9PLX3RT"),
    _shape("AWS secret access key", AWS_SECRET),
    _shape("Stripe live secret key", "sk_live_51Hx9QmK2vB7nR4tY8wZ3cF6"),
    _shape("Stripe live restricted key", "rk_live_51Hx9QmK2vB7nR4tY8wZ3cF7"),
    _shape("Stripe test key", "sk_test_4eC39HqLyjWDarjtT1zdp7dc"),
    _shape("Stripe webhook secret", "whsec_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8"),
    _shape("Google API key", "AIzaSyD3kL9mN2pQ7rS4tV8wX1yZ5aB6cE0fG2h"),
    _shape("GitHub classic token", GITHUB),
    _shape("GitHub fine-grained token", "github_pat_11ABCDE2F0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789"),
    _shape("GitHub OAuth token", "gho_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"),
    _shape("GitLab token", "glpat-Xy9Zw8Vu7Ts6Rq5Po4Nm"),
    _shape("Slack bot token", "xoxb-2048204820-4096409640-Zq8Wx7Cv6Bn5Mm4Ll3Kk2J"),
    _shape("Slack user token", "xoxp-1111222233-4444555566-7777888899-aAbBcCdDeE"),
    _shape(
        "Slack webhook",
        "https://hooks.slack.com/services/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",
        "T0123ABCD/B0456EFGH/Xy9Zw8Vu7Ts6Rq5Po4Nm3Lk2",
    ),
    _shape("SendGrid key", "SG.aBcDeFgHiJkLmNoPqRsTuV.wXyZ0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ0123"),
    _shape("npm token", "npm_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2"),
    _shape("Hugging Face token", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"),
    _shape(
        "JWT",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIn0.Qm9ndXNTaWduYXR1cmVfMTIzNDU2",
        "eyJzdWIiOiJ1c2VyLTQyIn0",
        "Qm9ndXNTaWduYXR1cmVfMTIzNDU2",
    ),
    _shape("Bearer token", "Authorization: Bearer Zk3Lm9Np2Qr7St4Vw8Xy1Za5", "Zk3Lm9Np2Qr7St4Vw8Xy1Za5"),
    _shape("Basic auth", f"Authorization: Basic {BASIC}", BASIC),
    _shape("credentials in a URL", "https://deploy:Tr0ub4dor-and-3@git.example.com/repo.git", "Tr0ub4dor-and-3"),
    _shape(
        "password= in a URL", "https://shop.example.com/login?user=ada&password=Pa55w0rd-Query-9", "Pa55w0rd-Query-9"
    ),
    _shape("token= in a URL", "https://api.example.com/v1/items?token=tok-Vq8Wx2Yz4Ab6Cd", "tok-Vq8Wx2Yz4Ab6Cd"),
    _shape("key= in a URL", "https://maps.example.com/api?key=kQ9wE8rT7yU6iO5pA4sD", "kQ9wE8rT7yU6iO5pA4sD"),
    _shape(
        "PEM RSA private key",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq9Zk3Lm9Np2Qr7St4Vw8\nXy1Za5Bc6De0Fg==\n-----END RSA PRIVATE KEY-----",
        "MIIEpAIBAAKCAQEA7bq9Zk3Lm9Np2Qr7St4Vw8",
        "Xy1Za5Bc6De0Fg==",
    ),
    _shape(
        "PEM OpenSSH private key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
    ),
    _shape(
        "card number with spaces",
        " ".join(VISA[i : i + 4] for i in range(0, 16, 4)),
        VISA,
        " ".join(VISA[i : i + 4] for i in range(0, 16, 4)),
    ),
    _shape(
        "card number with dashes",
        "-".join(MASTERCARD[i : i + 4] for i in range(0, 16, 4)),
        MASTERCARD,
        "-".join(MASTERCARD[i : i + 4] for i in range(0, 16, 4)),
    ),
    _shape("Amex card number", AMEX),
    _shape("sk- key split by a zero-width space", SPLIT_KEY, SPLIT_KEY, SPLIT_KEY.replace(ZW, "")),
    _shape(
        "AWS key id split by a zero-width joiner",
        "AKIA\u200dWX7Q2M9NB4KJ5RT3",
        "AKIA\u200dWX7Q2M9NB4KJ5RT3",
        "AKIAWX7Q2M9NB4KJ5RT3",
    ),
    _shape("login in a sentence", f'Log in as "ada" using "{LOGIN_PASSWORD}"', LOGIN_PASSWORD),
    _shape("password named by keyword", 'the password is "Quartz-Lamp-8812"', "Quartz-Lamp-8812"),
    _shape("password label", "Password: hunter2-Zeta-31", "hunter2-Zeta-31"),
    _shape("assignment in code", 'api_key = "ak9Qw8Er7Ty6Ui5Op4"', "ak9Qw8Er7Ty6Ui5Op4"),
    _shape("secret-named JSON field in text", '{"client_secret": "cs-Mn8Bv7Cx6Zl5Kj4"}', "cs-Mn8Bv7Cx6Zl5Kj4"),
    _shape("cookie header", "Cookie: sessionid=Sess9Xy8Wv7Ut6Rq5", "Sess9Xy8Wv7Ut6Rq5"),
    # issue 26: shapes the first corpus missed, and more of their kind
    _shape(
        "Authorization: Token",
        "Authorization: Token 9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b",
        "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b",
    ),
    _shape("Authorization: Digest-like scheme", "authorization=ApiKey Kq7Wd2Zx9Lm4Np8Rt3Vb", "Kq7Wd2Zx9Lm4Np8Rt3Vb"),
    _shape("Google OAuth access token", "ya29.a0AfH6SMBx7Kq2Lm9Np4Rt8Vw3Yz6Ab1Cd5Ef0Gh"),
    _shape("Google OAuth refresh token", "1//0gLq8Wx2Yz4Ab6Cd8Ef0Gh2Ij4Kl6Mn8Op"),
    _shape("Telegram bot token", "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0"),
    _shape("Discord bot token", "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs"),
    _shape("DigitalOcean token", "dop_v1_4f8a2c6e0b1d3f5a7c9e1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a4c6e8b0d1f3a"),
    _shape("Shopify access token", "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"),
    _shape(
        "PyPI token",
        "pypi-AgEIcHlwaS5vcmcCJGQ4ZWJhNzE2LTk3ZTQtNDYyZi1hMmI0LTNlZWI5ZjE4NGJkYQACKlszLCI5"
        "ZjQ1NTY2NC0xMDBhLTQxNzMtYjQ0Mi0xY2U2ZjYwZjNhNzciXQAABiBdL2y7Vq",
    ),
    _shape("Twilio API key", "SK2f8e4c6a0b1d3f5e7a9c1b3d5f7e9a1c"),
    _shape("Twilio account sid", "AC9b7d5f3e1a2c4e6b8d0f2a4c6e8b0d1f"),
    _shape("Vault token", "hvs.CAESIJx8Qm2Lw9Zp4Tk7Vr3Ns6Yb1Hc5Gd0Fe"),
    _shape("credentials before a host", "ssh deploy:Gr4nite-Falls-62@db.internal.example.com", "Gr4nite-Falls-62"),
    _shape("password named in a sentence", "the password is Velvet7Harbor", "Velvet7Harbor"),
    _shape("PIN named in a sentence", "Your PIN is 48213907 for the kiosk", "48213907"),
    _shape("fill into a password selector", "page.fill('#password', 'Amber-Gale-5530')", "Amber-Gale-5530"),
    _shape("fill into a located PIN field", 'page.get_by_label("PIN").fill("Cobalt-Mesa-7791")', "Cobalt-Mesa-7791"),
    _shape(
        "percent-encoded access_token",
        "https://app.example.com/cb#state=x&access_token%3DTq8Wn3Zr6Lp1Kv4Xs7",
        "Tq8Wn3Zr6Lp1Kv4Xs7",
    ),
    _shape(
        "twice percent-encoded password",
        "https://sso.example.com/next?u=https%253A%252F%252Fa.example%252F%253Fpassword%253DOrchid-Pike-4420",
        "Orchid-Pike-4420",
    ),
    _shape(
        "magic-link token",
        "https://app.example.com/auth/magic-link/eK3mP9qL2xW7vN4tR8sY1zB6",
        "eK3mP9qL2xW7vN4tR8sY1zB6",
    ),
    _shape(
        "password-reset link token",
        "https://shop.example.com/password-reset/Zt5Wq8Mn2Lp7Xr4Kb9Vd",
        "Zt5Wq8Mn2Lp7Xr4Kb9Vd",
    ),
    _shape("one-time code in a link", "https://id.example.com/verify?otp=73920418&user=ada", "73920418"),
    _shape(
        "card number with dots",
        ".".join(DOTTED_CARD[i : i + 4] for i in range(0, 16, 4)),
        DOTTED_CARD,
        ".".join(DOTTED_CARD[i : i + 4] for i in range(0, 16, 4)),
    ),
    _shape("sshpass -p", "sshpass -p 'Fjord-Lumen-2291' ssh admin@10.0.0.5", "Fjord-Lumen-2291"),
    _shape("mysql -p", "mysql -u root -pQuill-Basin-6604 shop", "Quill-Basin-6604"),
    _shape("--password option", "deploy --user ada --password Topaz-Ridge-3318", "Topaz-Ridge-3318"),
    _shape("Mailchimp key", "0f1e2d3c4b5a69788796a5b4c3d2e1f0-us14"),
    _shape("Square OAuth secret", "sq0csp-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4Cd5E"),
    _shape(
        "Azure storage key",
        "DefaultEndpointsProtocol=https;AccountName=shop;AccountKey=" + "Zm9vYmFy" * 11,
        "Zm9vYmFy" * 11,
    ),
)

#: the shapes written for memtape's own rules (checked alone, in a sentence and against detect-secrets)
OWN_SHAPES = SHAPES
#: and the held-out corpus's shapes the door hides (`tests/held_out_secrets.py`), planted through every
#: face the same way; each is checked in the context it was measured in by `tests/test_gitleaks_rules.py`
SHAPES += tuple(Shape(f"held out: {h.name}", h.text, h.needles) for h in CAUGHT)

#: values stored under secret-named keys (the names are patterns, not an exact list)
SECRET_KEYED: dict[str, str] = {
    "pwd": "kv-pwd-Lr4Ty7",
    "passwd": "kv-passwd-Qm2Xc9",
    "client_secret": "kv-client-Zp8Wn3",
    "refresh_token": "kv-refresh-Hs5Df1",
    "x-api-key": "kv-xapikey-Jb6Gk0",
    "secret_key": "kv-secretkey-Vt3Ye8",
    "private_key": "kv-private-Nc7Ru2",
    "Authorization": "kv-authz-Pw1Lm6",
    "cookie": "kv-cookie-Ea9So4",
    "sessionid": "kv-sessionid-Ki3Wq7",
    "session_token": "kv-sesstoken-Ub5Ox2",
    "apiKey": "kv-apikey-Fy8Ic1",
    "accessToken": "kv-accesstoken-Gd4Mh9",
    "AWS_SECRET_ACCESS_KEY": "kv-awssecret-Rx2Bn6",
}


def needles() -> list[str]:
    return [n for s in SHAPES for n in s.needles] + list(SECRET_KEYED.values()) + list(FIELD_SECRETS.values())
