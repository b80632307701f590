"""detect-secrets' plugin patterns (Yelp/detect-secrets 1.5.0, Apache-2.0), kept here verbatim.

The door (`ledger.redact`) runs these beside memtape's own detectors. They are copied rather than
imported because importing `detect_secrets` loads `requests` and its settings machinery on every
process that opens a ledger (more than the rest of the store's import; docs/benchmarks.md has
the start-up figures), while the door needs only the regular expressions.
`tests/test_secrets_at_rest.py` compares this table with the installed detect-secrets' plugins
(a dev dependency), so an upstream change fails a test naming the plugin instead of drifting.

Left out: the entropy plugins (they match every sha256 of the hash chain and every id), the public
IP plugin (an address is not a secret) and the keyword plugin (a per-language heuristic; memtape's
secret-named keys and labels cover what it looks for).

`secret` says which part of a match is the secret: "match" (the whole match, less the delimiters
some patterns take around a token), 1 (the first group: the pattern names the secret with a keyword
or a URL around it) or "rest" (a key file's marker: everything from it to the end of the text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Vendored:
    plugin: str  # the detect-secrets class the pattern comes from
    pattern: str
    flags: int = 0
    secret: Literal["match", "rest", 1] = "match"


_I = re.IGNORECASE
_KEYED = "(?:\"|\\'|)(?:\\]|)(?: *)(?:=|:|:=|=>| +|::)(?: *)(?:\"|\\'|)"
VENDORED: tuple[Vendored, ...] = (
    Vendored("ArtifactoryDetector", '(?:\\s|=|:|"|^)AKC[a-zA-Z0-9]{10,}(?:\\s|"|$)'),
    Vendored("ArtifactoryDetector", '(?:\\s|=|:|"|^)AP[\\dABCDEF][a-zA-Z0-9]{8,}(?:\\s|"|$)'),
    Vendored("AWSKeyDetector", "(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}"),
    Vendored(
        "AWSKeyDetector",
        "aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?[\\'\\\"]([0-9a-zA-Z/+]{40})[\\'\\\"]",
        _I,
        1,
    ),
    Vendored("AzureStorageKeyDetector", "AccountKey=[a-zA-Z0-9+\\/=]{88}"),
    Vendored(
        "BasicAuthDetector",
        "://[^:/\\?\\#\\[\\]@!\\$\\&'\\(\\)\\*\\+,;=\\s]+:([^:/\\?\\#\\[\\]@!\\$\\&'\\(\\)\\*\\+,;=\\s]+)@",
        0,
        1,
    ),
    Vendored(
        "CloudantDetector",
        "(?:(?<=\\W)|(?<=^))(?:\\[|)(?:\"|\\'|)(?:cloudant|cl|clou)(?:_|-|)(?:api|)(?:key|pwd|pw|password|pass|token)"
        + _KEYED
        + "([0-9a-f]{64})(?:\"|\\'|)",
        _I,
        1,
    ),
    Vendored(
        "CloudantDetector",
        "(?:(?<=\\W)|(?<=^))(?:\\[|)(?:\"|\\'|)(?:cloudant|cl|clou)(?:_|-|)(?:api|)(?:key|pwd|pw|password|pass|token)"
        + _KEYED
        + "([a-z]{24})(?:\"|\\'|)",
        _I,
        1,
    ),
    Vendored("CloudantDetector", "(?:https?\\:\\/\\/)[\\w\\-]+\\:([0-9a-f]{64})\\@[\\w\\-]+\\.cloudant\\.com", _I, 1),
    Vendored("CloudantDetector", "(?:https?\\:\\/\\/)[\\w\\-]+\\:([a-z]{24})\\@[\\w\\-]+\\.cloudant\\.com", _I, 1),
    Vendored("DiscordBotTokenDetector", "[MNO][a-zA-Z\\d_-]{23,25}\\.[a-zA-Z\\d_-]{6}\\.[a-zA-Z\\d_-]{27}"),
    Vendored("GitHubTokenDetector", "(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}"),
    Vendored("GitLabTokenDetector", "(glpat|gldt|glft|glsoat|glrt)-[A-Za-z0-9_\\-]{20,50}(?!\\w)"),
    Vendored("GitLabTokenDetector", "GR1348941[A-Za-z0-9_\\-]{20,50}(?!\\w)"),
    Vendored("GitLabTokenDetector", "glcbt-([0-9a-fA-F]{2}_)?[A-Za-z0-9_\\-]{20,50}(?!\\w)"),
    Vendored("GitLabTokenDetector", "glimt-[A-Za-z0-9_\\-]{25}(?!\\w)"),
    Vendored("GitLabTokenDetector", "glptt-[A-Za-z0-9_\\-]{40}(?!\\w)"),
    Vendored("GitLabTokenDetector", "glagent-[A-Za-z0-9_\\-]{50,1024}(?!\\w)"),
    Vendored("GitLabTokenDetector", "gloas-[A-Za-z0-9_\\-]{64}(?!\\w)"),
    Vendored(
        "IbmCloudIamDetector",
        "(?:(?<=\\W)|(?<=^))(?:\\[|)(?:\"|\\'|)(?:ibm(?:_|-|)cloud(?:_|-|)iam|cloud(?:_|-|)iam|ibm(?:_|-|)cloud|"
        "ibm(?:_|-|)iam|ibm|iam|cloud|)(?:_|-|)(?:api|)(?:_|-|)(?:key|pwd|password|pass|token)"
        + _KEYED
        + "([a-zA-Z0-9_\\-]{44}(?![a-zA-Z0-9_\\-]))(?:\"|\\'|)",
        _I,
        1,
    ),
    Vendored(
        "IbmCosHmacDetector",
        "(?:(?<=\\W)|(?<=^))(?:\\[|)(?:\"|\\'|)(?:(?:ibm)?[-_]?cos[-_]?(?:hmac)?|)(?:_|-|)"
        "(?:secret[-_]?(?:access)?[-_]?key)" + _KEYED + "([a-f0-9]{48}(?![a-f0-9]))(?:\"|\\'|)",
        _I,
        1,
    ),
    Vendored("JwtTokenDetector", "eyJ[A-Za-z0-9-_=]+\\.[A-Za-z0-9-_=]+\\.?[A-Za-z0-9-_.+/=]*?"),
    Vendored("MailchimpDetector", "[0-9a-z]{32}-us[0-9]{1,2}"),
    Vendored("NpmDetector", "\\/\\/.+\\/:_authToken=\\s*((npm_.+)|([A-Fa-f0-9-]{36})).*", 0, 1),
    Vendored("OpenAIDetector", "sk-[A-Za-z0-9-_]*[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}"),
    *(
        Vendored("PrivateKeyDetector", marker, 0, "rest")
        for marker in (
            "BEGIN DSA PRIVATE KEY",
            "BEGIN EC PRIVATE KEY",
            "BEGIN OPENSSH PRIVATE KEY",
            "BEGIN PGP PRIVATE KEY BLOCK",
            "BEGIN PRIVATE KEY",
            "BEGIN RSA PRIVATE KEY",
            "BEGIN SSH2 ENCRYPTED PRIVATE KEY",
            "PuTTY-User-Key-File-2",
        )
    ),
    Vendored("PypiTokenDetector", "pypi-AgEIcHlwaS5vcmc[A-Za-z0-9-_]{70,}"),
    Vendored("PypiTokenDetector", "pypi-AgENdGVzdC5weXBpLm9yZw[A-Za-z0-9-_]{70,}"),
    Vendored("SendGridDetector", "SG\\.[a-zA-Z0-9_-]{22}\\.[a-zA-Z0-9_-]{43}"),
    Vendored("SlackDetector", "xox(?:a|b|p|o|s|r)-(?:\\d+-)+[a-z0-9]+", _I),
    Vendored(
        "SlackDetector",
        "https://hooks\\.slack\\.com/services/T[a-zA-Z0-9_]+/B[a-zA-Z0-9_]+/[a-zA-Z0-9_]+",
        _I | re.VERBOSE,
    ),
    Vendored(
        "SoftlayerDetector",
        "(?:(?<=\\W)|(?<=^))(?:\\[|)(?:\"|\\'|)(?:softlayer|sl)(?:_|-|)(?:api|)(?:_|-|)(?:key|pwd|password|pass|token)"
        + _KEYED
        + "([a-z0-9]{64})(?:\"|\\'|)",
        _I,
        1,
    ),
    Vendored("SoftlayerDetector", "(?:http|https)://api.softlayer.com/soap/(?:v3|v3.1)/([a-z0-9]{64})", _I, 1),
    Vendored("SquareOAuthDetector", "sq0csp-[0-9A-Za-z\\\\\\-_]{43}"),
    Vendored("StripeDetector", "(?:r|s)k_live_[0-9a-zA-Z]{24}"),
    Vendored("TelegramBotTokenDetector", "\\d{8,10}:[0-9A-Za-z_-]{35}"),
    Vendored("TwilioKeyDetector", "AC[a-z0-9]{32}"),
    Vendored("TwilioKeyDetector", "SK[a-z0-9]{32}"),
)
#: per plugin, lower-case text of which every match of its patterns holds at least one: the door runs
#: a plugin's patterns over a string only when the lower-cased string holds one of these
PLUGIN_NEEDS: dict[str, tuple[str, ...]] = {
    "ArtifactoryDetector": ("akc", "ap"),
    "AWSKeyDetector": ("a3t", "abia", "acca", "akia", "asia", "aws"),
    "AzureStorageKeyDetector": ("accountkey=",),
    "BasicAuthDetector": ("@",),
    "CloudantDetector": ("key", "pw", "pass", "token", "cloudant"),
    "DiscordBotTokenDetector": (".",),
    "GitHubTokenDetector": ("gh",),
    "GitLabTokenDetector": ("gl", "gr1348941"),
    "IbmCloudIamDetector": ("key", "pwd", "pass", "token"),
    "IbmCosHmacDetector": ("secret",),
    "JwtTokenDetector": ("eyj",),
    "MailchimpDetector": ("-us",),
    "NpmDetector": ("_authtoken=",),
    "OpenAIDetector": ("t3blbkfj",),
    "PrivateKeyDetector": ("begin ", "putty-user-key-file-2"),
    "PypiTokenDetector": ("pypi-",),
    "SendGridDetector": ("sg.",),
    "SlackDetector": ("xox", "hooks.slack.com"),
    "SoftlayerDetector": ("key", "pwd", "pass", "token", "softlayer"),
    "SquareOAuthDetector": ("sq0csp-",),
    "StripeDetector": ("k_live_",),
    "TelegramBotTokenDetector": (":",),
    "TwilioKeyDetector": ("ac", "sk"),
}
#: the plugins whose every pattern is above (the sync test checks these, and that no other is missed silently)
PLUGINS: tuple[str, ...] = tuple(dict.fromkeys(v.plugin for v in VENDORED))
LEFT_OUT: tuple[str, ...] = ("Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector", "KeywordDetector")

#: what any match of a pattern above contains, written so that it also finds the token inside a
#: payload's JSON text (no delimiters, quotes or anchors): the door's fast screen (`may_hold_secret`)
#: searches it where its cheaper stems found nothing, so the screen stays a superset of the patterns.
#: Every branch begins with a literal character, so the search skips to the few places one of them
#: is (a branch beginning with a class, such as Discord's `[MNO]` or Telegram's `\d`, would make it
#: try every branch at every character)
SCREEN = re.compile(
    "|".join(
        (
            r"AKC[a-zA-Z0-9]{10}",
            r"AP[\dABCDEF][a-zA-Z0-9]{8}",
            r"A3T[A-Z0-9][0-9A-Z]{16}",
            r"\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}",
            r"-us[0-9]",
            r":[0-9A-Za-z_-]{35}",
            r"AC[a-z0-9]{32}",
            r"SK[a-z0-9]{32}",
            r"GR1348941",
        )
    )
)
#: lower-case stems of the rest (searched in the lower-cased text)
SCREEN_STEMS: tuple[str, ...] = (
    "gldt-",
    "glft-",
    "glsoat-",
    "glrt-",
    "glcbt-",
    "glimt-",
    "glptt-",
    "glagent-",
    "gloas-",
    "pypi-",
    "sq0csp-",
    "putty-user-key",
    "softlayer",
    "ghu_",
    "ghs_",
    "ghr_",
    "private key",
    "cloudant",
    "accountkey=",
    "_authtoken=",
    "t3blbkfj",
)
