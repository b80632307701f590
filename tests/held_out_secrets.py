"""A held-out corpus of secret shapes: written from the formats the providers document (prefix,
length, alphabet, where a key is put), not from any rule memtape vendors, and measured once before
any rule was changed for it (docs/trust.md gives that first figure).

Every value is made up here from a seeded generator (none is a live credential); each shape sits in
the context it is met in (an env line, a JSON body, a header, a URL, a sentence). `needles` are the
parts that must never be at rest.
"""

from __future__ import annotations

import random
import re
import string
from dataclasses import dataclass

_rng = random.Random(20261204)
ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64URL = ALNUM + "-_"
B32 = string.ascii_lowercase + "234567"
UPPER_ALNUM = string.ascii_uppercase + string.digits


def rand(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


@dataclass(frozen=True)
class HeldOut:
    name: str
    kind: str  # saas, cloud, key file, bank, national id, link
    text: str
    needles: tuple[str, ...]


def _h(name: str, kind: str, text: str, *needles: str) -> HeldOut:
    return HeldOut(name, kind, text, needles)


def iban(country: str, bban: str) -> str:
    """A valid IBAN: the check digits that make `bban + country + "00"` 1 mod 97."""
    digits = "".join(str(int(c, 36)) for c in bban + country + "00")
    return f"{country}{98 - int(digits) % 97:02d}{bban}"


def _dni(number: int) -> str:
    return f"{number:08d}" + "TRWAGMYFPDXBNJZSQVHLCKE"[number % 23]


LINEAR = "lin_api_" + rand(ALNUM, 40)
ATLASSIAN = "ATATT3xFfGF0" + rand(B64URL, 170) + "=" + rand(HEX.upper(), 8)
ASANA = f"2/{rand('123456789', 16)}/{rand('123456789', 16)}:{rand(HEX, 32)}"
CLICKUP = f"pk_{rand('123456789', 8)}_{rand(UPPER_ALNUM, 32)}"
DATADOG = rand(HEX, 32)
NEWRELIC = "NRAK-" + rand(UPPER_ALNUM, 27)
SENTRY = "sntryu_" + rand(HEX, 64)
GRAFANA = f"glsa_{rand(ALNUM, 32)}_{rand(HEX, 8)}"
NOTION = "ntn_" + rand(string.digits, 11) + rand(ALNUM, 35)
FIGMA = "figd_" + rand(B64URL, 40)
AIRTABLE = f"pat{rand(ALNUM, 14)}.{rand(HEX, 64)}"
POSTMAN = f"PMAK-{rand(HEX, 24)}-{rand(HEX, 34)}"
DOPPLER = "dp.pt." + rand(ALNUM, 43)
AZURE_CLIENT_SECRET = rand(ALNUM, 3) + rand(string.digits, 1) + "Q~" + rand(ALNUM + "_.-", 34)
ALIBABA_ID = "LTAI" + rand(ALNUM, 20)
ALIBABA_SECRET = rand(ALNUM, 30)
TENCENT_ID = "AKID" + rand(ALNUM, 32)
GCP_CLIENT_SECRET = "GOCSPX-" + rand(B64URL, 28)
CLOUDFLARE = rand(B64URL, 40)
TWILIO_AUTH = rand(HEX, 32)
OKTA = "00" + rand(ALNUM + "-_", 40)
DATABRICKS = "dapi" + rand(HEX, 32)
TFC = rand(ALNUM, 14) + ".atlasv1." + rand(ALNUM, 67)
BITBUCKET = "ATBB" + rand(ALNUM, 32)
AZURE_DEVOPS = rand(B32, 52)
ALGOLIA_ADMIN = rand(HEX, 32)
MAILGUN = "key-" + rand(HEX, 32)
DROPBOX = "sl." + rand(B64URL, 135)
DISCORD_HOOK = f"{rand(string.digits, 18)}/{rand(B64URL, 68)}"
SQUARE = "EAAA" + rand(B64URL, 60)
PUTTY_PRIVATE = rand(ALNUM + "+/", 64)
AGE_KEY = "AGE-SECRET-KEY-1" + rand("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)
WIREGUARD = rand(ALNUM + "+/", 43) + "="
JWK_D = rand(B64URL, 86)
IBAN_DE = iban("DE", "37040044" + rand(string.digits, 10))
IBAN_FR = iban("FR", rand(string.digits, 10) + rand(UPPER_ALNUM, 11) + rand(string.digits, 2))
IBAN_NL = iban("NL", "ABNA" + rand(string.digits, 10))
SSN = f"{_rng.randint(100, 665)}-{_rng.randint(10, 99)}-{_rng.randint(1000, 9999)}"
NINO = f"J{_rng.choice('ABCEGHJKLMNPRSTWXYZ')} {_rng.randint(10, 99)} {_rng.randint(10, 99)} {_rng.randint(10, 99)} {_rng.choice('ABCD')}"
DNI = _dni(_rng.randint(10_000_000, 99_999_999))
MAGIC_T = rand(ALNUM, 22)
MAGIC_K = rand(B64URL, 32)
RESET_C = rand(HEX, 24)

HELD_OUT: tuple[HeldOut, ...] = (
    _h("Linear API key", "saas", f"LINEAR_API_KEY={LINEAR}", LINEAR),
    _h("Atlassian API token", "saas", f"export JIRA_API_TOKEN={ATLASSIAN}", ATLASSIAN),
    _h("Asana personal access token", "saas", f'{{"asana_pat": "{ASANA}"}}', ASANA),
    _h("ClickUp API token", "saas", f"ClickUp token {CLICKUP} for the workspace", CLICKUP),
    _h("Datadog API key", "saas", f"DD_API_KEY={DATADOG}", DATADOG),
    _h("New Relic user key", "saas", f"the key {NEWRELIC} was pasted", NEWRELIC),
    _h("Sentry user token", "saas", f"SENTRY_AUTH_TOKEN={SENTRY}", SENTRY),
    _h("Grafana service account token", "saas", f"grafana: {GRAFANA}", GRAFANA),
    _h("Notion integration token", "saas", f"Notion secret {NOTION}", NOTION),
    _h("Figma personal access token", "saas", f"X-Figma-Token: {FIGMA}", FIGMA),
    _h("Airtable personal access token", "saas", f"airtable = {AIRTABLE}", AIRTABLE),
    _h("Postman API key", "saas", f"postman key {POSTMAN}", POSTMAN),
    _h("Doppler token", "saas", f"DOPPLER_TOKEN={DOPPLER}", DOPPLER),
    _h("Okta API token", "saas", f"Authorization: SSWS {OKTA}", OKTA),
    _h("Databricks token", "saas", f"databricks host token {DATABRICKS}", DATABRICKS),
    _h("Terraform Cloud token", "saas", f'token = "{TFC}"', TFC),
    _h("Bitbucket app password", "saas", f"bitbucket app password {BITBUCKET}", BITBUCKET),
    _h("Azure DevOps PAT", "saas", f"AZURE_DEVOPS_EXT_PAT={AZURE_DEVOPS}", AZURE_DEVOPS),
    _h("Algolia admin key", "saas", f'{{"algoliaAdminKey": "{ALGOLIA_ADMIN}"}}', ALGOLIA_ADMIN),
    _h("Mailgun key", "saas", f"api:{MAILGUN}", MAILGUN),
    _h("Dropbox token", "saas", f"DROPBOX_ACCESS_TOKEN={DROPBOX}", DROPBOX),
    _h("Discord webhook", "saas", f"https://discord.com/api/webhooks/{DISCORD_HOOK}", DISCORD_HOOK),
    _h("Square access token", "saas", f"square access {SQUARE}", SQUARE),
    _h("Twilio auth token", "saas", f"TWILIO_AUTH_TOKEN={TWILIO_AUTH}", TWILIO_AUTH),
    _h("Azure AD client secret", "cloud", f"AZURE_CLIENT_SECRET={AZURE_CLIENT_SECRET}", AZURE_CLIENT_SECRET),
    _h("Alibaba access key id", "cloud", f"accessKeyId {ALIBABA_ID}", ALIBABA_ID),
    _h("Alibaba access key secret", "cloud", f"ALIBABA_CLOUD_ACCESS_KEY_SECRET={ALIBABA_SECRET}", ALIBABA_SECRET),
    _h("Tencent SecretId", "cloud", f"SecretId: {TENCENT_ID}", TENCENT_ID),
    _h(
        "Google OAuth client secret",
        "cloud",
        f'{{"client_id": "x.apps.googleusercontent.com", "cs": "{GCP_CLIENT_SECRET}"}}',
        GCP_CLIENT_SECRET,
    ),
    _h("Cloudflare API token", "cloud", f"CLOUDFLARE_API_TOKEN={CLOUDFLARE}", CLOUDFLARE),
    _h(
        "PuTTY v3 private key",
        "key file",
        f"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPrivate-Lines: 1\n{PUTTY_PRIVATE}\nPrivate-MAC: {rand(HEX, 64)}",
        PUTTY_PRIVATE,
    ),
    _h("age secret key", "key file", f"# created: 2026-12-04\n{AGE_KEY}", AGE_KEY),
    _h("WireGuard private key", "key file", f"[Interface]\nPrivateKey = {WIREGUARD}\nAddress = 10.0.0.2/32", WIREGUARD),
    _h("JWK private exponent", "key file", f'{{"kty": "RSA", "n": "0vx7", "e": "AQAB", "d": "{JWK_D}"}}', JWK_D),
    _h("IBAN (Germany)", "bank", f"Please pay to IBAN {IBAN_DE} by Friday", IBAN_DE),
    _h(
        "IBAN (France), grouped",
        "bank",
        "IBAN: " + " ".join(IBAN_FR[i : i + 4] for i in range(0, len(IBAN_FR), 4)),
        " ".join(IBAN_FR[i : i + 4] for i in range(0, len(IBAN_FR), 4)),
    ),
    _h("IBAN (Netherlands) in JSON", "bank", f'{{"account": "{IBAN_NL}"}}', IBAN_NL),
    _h("US social security number", "national id", f"SSN {SSN} on file", SSN),
    _h("UK national insurance number", "national id", f"NI number: {NINO}", NINO),
    _h("Spanish DNI", "national id", f"DNI {DNI}", DNI),
    _h("sign-in link ?t=", "link", f"https://app.example.com/login?t={MAGIC_T}", MAGIC_T),
    _h("magic link ?k=", "link", f"https://id.example.org/magic?email=ada%40x.org&k={MAGIC_K}", MAGIC_K),
    _h("password reset link ?c=", "link", f"https://shop.example.net/account/reset?c={RESET_C}", RESET_C),
    _h("verify-email link ?id=", "link", f"https://mail.example.com/verify-email?id={MAGIC_T[::-1]}", MAGIC_T[::-1]),
)


def pieces(needle: str) -> list[str]:
    """The needle and its parts of 8+ characters between separators: a shape is hidden only when no
    such part is left (a token cut in two by a rule that finds half of it is not hidden)."""
    return [needle, *(p for p in re.split(r"[._:/ -]", needle) if len(p) >= 8)]


#: held-out shapes no rule finds (measured, not hidden): a test fails when one starts to be found,
#: so the docs' figure is kept true. Empty since the classes of `ledger.key_material` and
#: `ledger.token_shapes` (written for the classes, not for these prefixes) found the last five: an
#: Asana PAT, a Discord webhook URL, a Google OAuth client secret under an unnamed key, a PuTTY v3
#: key body and a JWK's private exponent `d`
STILL_MISSED: frozenset[str] = frozenset()
#: the shapes the door hides, planted through every face by `tests/test_secrets_at_rest.py`
CAUGHT: tuple[HeldOut, ...] = tuple(h for h in HELD_OUT if h.name not in STILL_MISSED)
