"""The classes of secret written for classes, not for vendors' prefixes (`ledger/key_material.py`,
`ledger/token_shapes.py`): private-key material in containers other than PEM, credentials in URL
paths, and tokens by their shape with no key name before them. Each class is tried with made-up
shapes of its kind (no real vendor's prefix needed), seeded random tokens are caught at a measured
rate, ordinary text that looks random (CSS classes, asset hashes, UUIDs, memtape's ids, digests,
selectors, names) is kept byte for byte, the door's screen lets none of these secrets past, and
any string up to 1 MB is answered.
"""

from __future__ import annotations

import hashlib
import json
import random
import string
import uuid

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from memtape.ledger.ids import short_id, uuid7
from memtape.ledger.redact import MARKER, Redactor, may_hold_secret
from memtape.ledger.token_shapes import random_body
from tests.test_gitleaks_rules import _hang_guard

_rng = random.Random(20261205)
B62 = string.ascii_letters + string.digits
B64 = B62 + "+/"
B64URL = B62 + "-_"
HEX = "0123456789abcdef"


def rand(alphabet: str, n: int, rng: random.Random = _rng) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _hidden(text: str, *needles: str) -> None:
    out = Redactor().text(text)
    kept = [n for n in needles if n in out]
    assert not kept and MARKER in out, (text, out)
    assert may_hold_secret(text) and may_hold_secret(json.dumps({"v": text}))


# ---- private-key material in any container ---------------------------------------------------

PPK_V2 = rand(B64, 64)
SSH2 = [rand(B64, 64) for _ in range(3)]
PGP = rand(B64, 64)
MINISIGN = "RWRTY0Iy" + rand(B64, 150)
RSA_D = rand(B64URL, 86)
EC_D = rand(B64URL, 43)
OCT_K = rand(B64URL, 43)
XML_D = rand(B64, 44) + "=="


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            f"PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: ada\nPublic-Lines: 1\nAAAAB3Nza\n"
            f"Private-Lines: 1\n{PPK_V2}\nPrivate-Hash: {rand(HEX, 40)}",
            PPK_V2,
        ),
        (f"Private-Lines: 2\\n{PPK_V2[:32]}\\n{PPK_V2[32:]}\\nPrivate-MAC: {rand(HEX, 64)}", PPK_V2[32:]),
        ("---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nComment: x\n" + "\n".join(SSH2), SSH2[2]),
        (
            "---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\n"
            + "\n".join(SSH2)
            + "\n---- END SSH2 ENCRYPTED PRIVATE KEY ----",
            SSH2[1],
        ),
        (f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{PGP}\n=abcd\n-----END PGP PRIVATE KEY BLOCK-----", PGP),
        (f"-----BEGIN OPENSSH PRIVATE KEY-----\\n{PGP}\\n-----END OPENSSH PRIVATE KEY-----", PGP),
        (f"untrusted comment: minisign encrypted secret key\n{MINISIGN}", MINISIGN),
        (f"Private key (base64):\r\n{MINISIGN}", MINISIGN),
        (f'{{"kty": "RSA", "n": "0vx7", "e": "AQAB", "d": "{RSA_D}", "p": "{EC_D}", "qi": "{OCT_K}"}}', RSA_D),
        (f'{{"kty": "RSA", "n": "0vx7", "e": "AQAB", "d": "{RSA_D}", "p": "{EC_D}", "qi": "{OCT_K}"}}', OCT_K),
        (f'{{"keys": [{{"crv": "P-256", "x": "f83O", "y": "x_FE", "d": "{EC_D}", "kty": "EC"}}]}}', EC_D),
        (f"{{'kty': 'oct', 'k': '{OCT_K}'}}", OCT_K),
        (json.dumps(json.dumps({"kty": "OKP", "crv": "Ed25519", "d": EC_D})), EC_D),
        (f"<RSAKeyValue><Modulus>xA7S</Modulus><Exponent>AQAB</Exponent><D>{XML_D}</D></RSAKeyValue>", XML_D),
    ],
)
def test_private_key_material_is_hidden_in_any_container(text: str, needle: str) -> None:
    _hidden(text, needle)


def test_a_json_web_key_in_a_payload_keeps_its_public_members_only() -> None:
    jwk = {"kty": "EC", "crv": "P-256", "x": "f83OJ3D2xF1Bg8vu", "y": "x_FE", "d": EC_D}
    out = Redactor().value({"command": "sign", "args": {"jwk": jwk}})
    assert out["args"]["jwk"] == {**jwk, "d": MARKER}
    rsa = {"kty": "RSA", "n": "0vx7", "e": "AQAB", "oth": [{"r": "AQAB", "d": "Zq8W", "t": "x4kT"}]}
    assert Redactor().value(rsa) == {**rsa, "oth": [{"r": MARKER, "d": MARKER, "t": MARKER}]}
    # without `kty` beside them, such short names are plain fields
    assert Redactor().value({"d": "2026-12-04", "p": 3, "k": "v"}) == {"d": "2026-12-04", "p": 3, "k": "v"}


# ---- credentials in a URL path ---------------------------------------------------------------

HOOK_ID, HOOK_TOKEN = rand(string.digits, 19), rand(B64URL, 64)


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        (f"POST https://chat.example.net/api/webhooks/{HOOK_ID}/{HOOK_TOKEN}", (HOOK_ID, HOOK_TOKEN)),
        (f"curl -X POST https://team.example.org/hooks/{rand(string.ascii_lowercase + string.digits, 26)}", ()),
        (f"the hook is https://automate.example.com/webhook/{uuid.uuid4()} (keep it private)", ()),
        (
            f"https://ci.example.io/services/{rand('ABCDEFGHJKLMNPQRSTUVWXYZ0123456789', 11)}/{HOOK_TOKEN}",
            (HOOK_TOKEN,),
        ),
        (f"https://alerts.example.com/incoming/{rand(HEX, 32)}/notify", ()),
        (f"see https://files.example.com/s/{HOOK_TOKEN[:40]}/report.pdf for it.", (HOOK_TOKEN[:40],)),
        (f"https://api.example.com/bot{HOOK_ID[:10]}:{rand(B64URL, 35)}/sendMessage", (HOOK_ID[:10],)),
    ],
)
def test_a_credential_in_a_url_path_is_hidden(text: str, needles: tuple[str, ...]) -> None:
    before = Redactor().text(text)
    assert before != text and MARKER in before, text
    _hidden(text, *needles)


# ---- unanchored structured tokens -------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    st.text(string.ascii_lowercase, min_size=2, max_size=8),
    st.sampled_from(["lower", "upper", "title"]),
    st.sampled_from(["_", "-", "."]),
    st.sampled_from([B62, B64URL, string.ascii_uppercase + string.digits, string.ascii_lowercase + string.digits]),
    st.integers(24, 80),
    st.randoms(use_true_random=False),
    st.sampled_from(["KEY={}", '{{"v": "{}"}}', "it was {} then", "x: '{}'", "https://a.test/x?q={}&b=1", "[{}]."]),
)
def test_a_token_of_a_made_up_prefix_is_hidden(
    word: str, case: str, sep: str, alphabet: str, n: int, rng: random.Random, context: str
) -> None:
    body = rand(alphabet, n, rng)
    assume(random_body(body))  # the rate of bodies judged random is measured below
    prefix = {"lower": word, "upper": word.upper(), "title": word.title()}[case]
    token = f"{prefix}{sep}{body}"
    _hidden(context.format(token), body)


def test_seeded_random_tokens_are_caught_at_a_measured_rate() -> None:
    """The share of random bodies judged random (the docs give it): 98%+ at 24 characters for every
    alphabet that mixes letters and digits; hex from 32 characters."""
    rng = random.Random(7)
    alphabets = {
        "base62": B62,
        "base64url": B64URL,
        "upper+digits": string.ascii_uppercase + string.digits,
        "lower+digits": string.ascii_lowercase + string.digits,
    }
    for name, alphabet in alphabets.items():
        for n in (24, 32, 48):
            caught = sum(random_body(rand(alphabet, n, rng)) for _ in range(1000))
            assert caught >= 980, (name, n, caught)
    assert sum(random_body(rand(HEX, 32, rng)) for _ in range(1000)) >= 990
    assert not any(random_body(rand(HEX, 31, rng)) for _ in range(200))  # a short hex is an id


def test_a_long_random_run_with_no_name_is_hidden() -> None:
    base58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
    for key in (rand(B64, 43) + "=", rand(base58, 52), rand(B64URL, 64), rand(base58, 88)):
        _hidden(f"the tunnel uses {key} from now on", key.rstrip("="))
        _hidden(f"{{'peer': ['{key}']}}", key.rstrip("="))


@pytest.mark.parametrize(
    "text",
    [
        f'{{"pat": "1/{rand(string.digits, 16)}/{rand(string.digits, 16)}:{rand(HEX, 32)}"}}',
        f"bot token {rand(string.digits, 10)}:{rand(B64URL, 35)}",
        f"use {rand(string.digits, 8)}:{rand(B62, 40)} to sign in",
    ],
)
def test_an_id_and_a_secret_joined_by_a_colon_are_hidden(text: str) -> None:
    secret = text.rsplit(":", 1)[1].split()[0].strip('"}')
    _hidden(text, secret)


# ---- ordinary text that looks random is kept -------------------------------------------------

_DIGEST = hashlib.sha256(b"memtape").hexdigest()
KEPT = [
    # CSS classes and selectors
    '<div class="css-1q2w3e4r sc-bdVaJa MuiButton-root MuiButton-containedPrimary jsx-2847293847">',
    "#root > div.css-1x2y3z4 > button[data-testid='submit-order-2024']:nth-child(2)",
    "input[name=email][autocomplete=username] ~ .Form_field__3xYz9",
    # hashes in asset URLs
    "/static/js/main.3f9a2c7e1b3d5f80a1b2.chunk.js",
    "https://cdn.example.com/assets/index-BxK3f9aQ.js",
    "/_next/static/chunks/pages/_app-0123456789abcdef.js",
    "/assets/app-3f9a2c7e1b3d5f80a1b2c3d4e5f60718a9b0c1d2.css",
    "https://cdn.example.com/img/8f14e45fceea167a5a36dedd4bea2543.png",
    "https://cdn.example.com/fonts/Inter-Variable-Kx9aB2mQ7vL3pR8tZ1wN5cD4.woff2",
    '<script src="/js/app.js" integrity="sha384-oqVuAfXRKap7fdgcCY5uykM6+R9GqQ8K/uxy9rx7HNQlGYl1kPzQho1wx4JwY8wC">',
    '"integrity": "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXPs17LhbZVGedAJv8XZ1tvj5FvSg=="',
    # digests, commits, UUIDs and memtape's own ids
    f"sha256:{_DIGEST}",
    f"prev_hash {_DIGEST} seq 42",
    f"https://git.example.com/org/repo/commit/{_DIGEST[:40]}",
    f"commit-{_DIGEST[:40]} build_{_DIGEST}",
    "req_0190f5c2-7a1b-7c3d-9e4f-5a6b7c8d9e0f",
    "Idempotency-Key: 0190f5c2-7a1b-7c3d-9e4f-5a6b7c8d9e0f",
    "run_1710543210_ab12cd finished; lesson_1710543211_9f8e7d promoted",
    "redacted-3f9a2c7e1b3d5f80",
    "http://127.0.0.1:8765/runs/run_1710543210_ab12cd/events?after=0190f5c2-7a1b-7c3d-9e4f-5a6b7c8d9e0f",
    # names, slugs, versions, paths, times
    "test_429_and_500_are_retried_with_backoff_until_success",
    "getUserProfileSettingsForAccount2024 XMLHttpRequestEventTargetHandlers",
    "https://blog.example.com/2024/12/how-to-build-a-fast-website-in-2024-part-3",
    "node-v20.11.0-linux-x64-musl.tar.xz ubuntu-22.04.3-live-server-amd64.iso",
    "/home/ada/projects/memtape/tests/test_secrets_at_rest.py:519: AssertionError",
    "2026-12-04T21:20:14.123456+00:00 at 12:30:45, 16:9, [2001:db8::1]:8080",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    "The quick_brown_fox-jumps.over the lazy dog 1234567890 times.",
    "a private key is never shown here:\nsee docs/trust.md for how keys are handled",
    "Secret keys\n===========================================",
    '{"kty": "RSA", "n": "0vx7tmHW", "e": "AQAB", "use": "sig", "kid": "2011-04-29"}',
]


@pytest.mark.parametrize("text", KEPT)
def test_ordinary_text_that_looks_random_is_kept(text: str) -> None:
    assert Redactor().text(text) == text


@settings(max_examples=200, deadline=None)
@given(
    st.binary(min_size=1, max_size=64),
    st.sampled_from(["run", "lesson", "req", "evt", "build", "chunk", "id"]),
    st.sampled_from(["_", "-", "."]),
)
def test_ids_and_digests_after_a_prefix_are_kept(data: bytes, prefix: str, sep: str) -> None:
    digest = hashlib.sha256(data).hexdigest()
    ident = str(uuid.UUID(bytes=hashlib.md5(data).digest()))
    samples = [
        f"{prefix}{sep}{ident}",
        f"{prefix}{sep}{uuid7()}",
        f"/static/{prefix}{sep}{digest[:32]}.js",
        short_id(prefix),
        f"{prefix}:{digest}",
        f"https://shop.test/{prefix}/{digest}",
    ]
    redactor = Redactor()
    assert [s for s in samples if redactor.text(s) != s] == []


# ---- extremes: any string up to 1 MB is answered ---------------------------------------------

_UNITS = [
    "-----BEGIN ",
    "---- BEGIN SSH2 PRIVATE KEY ----\n",
    "Private-Lines: 9\nQUJD",
    "secret key\n" + "A1b2" * 10,
    '"kty" "d": "',
    "<Modulus><D>",
    "/hooks/a1",
    "/aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3",
    "aB3-",
    "x_",
    "12345678:",
    "1/2/",
    "kty d=",
]


@settings(max_examples=6, deadline=None)
@given(
    st.lists(st.sampled_from(_UNITS), min_size=1, max_size=3),
    st.sampled_from([100_000, 1_000_000]),
    st.randoms(use_true_random=False),
)
def test_any_string_up_to_a_megabyte_is_answered(units: list[str], size: int, rng: random.Random) -> None:
    """Adversarial repetitions of what the classes' patterns start with, mixed with random bytes of
    the token alphabet: each is answered (no catastrophic backtracking); bench/redaction.py gives
    the time per character."""
    noise = rand(B64URL + ":/.= \n", 64, rng)
    text = ("".join(units) + noise) * (size // (len("".join(units)) + 64) + 1)
    with _hang_guard(300):
        out = Redactor().text(text[:size])
    assert isinstance(out, str)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(["x_", "KEY-", "1234567:", "/hooks/", "/", " ", "\n", "kty ", "d: ", "private key\n"]),
            st.builds(
                lambda alphabet, n, seed: rand(alphabet, n, random.Random(seed)),
                st.sampled_from([B62, B64, B64URL, string.ascii_letters, HEX + "-"]),
                st.integers(8, 90),
                st.integers(0, 2**32),
            ),
        ),
        max_size=6,
    )
)
def test_the_screen_lets_no_secret_of_these_classes_past(parts: list[str]) -> None:
    """The door skips the scrub of a payload whose JSON text the screen clears: whatever the classes
    change, the screen flags, as written and JSON-encoded."""
    text = "".join(parts)
    if Redactor().text(text) != text:
        assert may_hold_secret(text) and may_hold_secret(json.dumps({"v": text})), text
