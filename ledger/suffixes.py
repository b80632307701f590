"""Where one site ends: the public-suffix list (the copy bundled in `tldextract`, never the network).

A lesson scoped to `amazon.com` applies to `www.amazon.com`; one scoped to a
public suffix (`com`, `co.uk`, `github.io`) would apply to every site under
it, so such a scope is refused. Matching a host to a scope stops at the
host's registrable domain: `a.co.uk` and `b.co.uk` are two sites, whatever
is written. Hosts under no listed suffix (`shop.test`, `localhost`, an IP
address) are their own site at their last two labels.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import Any

#: ICANN and private entries: `a.github.io` and `b.github.io` are different sites too
_OPTIONS: dict[str, Any] = {"suffix_list_urls": (), "cache_dir": None, "include_psl_private_domains": True}


@lru_cache(maxsize=1)
def _extract() -> Any:
    """The extractor over the bundled snapshot. Imported on first use: `tldextract` pulls in
    `requests`, which every command would otherwise pay for at start."""
    import tldextract

    return tldextract.TLDExtract(**_OPTIONS)


def host_name(host: str) -> str:
    """The host without its port, lower-cased (`Shop.test:8080` -> `shop.test`)."""
    name, _, port = host.lower().rpartition(":")
    return name if port.isdigit() and name else host.lower()


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


@lru_cache(maxsize=65536)
def site_of(host: str) -> str | None:
    """The registrable domain of `host` (`www.amazon.co.uk` -> `amazon.co.uk`), or None when the
    host is itself a public suffix."""
    bare = host_name(host)
    if _is_ip(bare):
        return bare
    parts = _extract()(bare)
    if parts.suffix:
        return parts.top_domain_under_public_suffix or None
    return ".".join(bare.split(".")[-2:])


def is_public_suffix(host: str) -> bool:
    """`com`, `co.uk`, `github.io`: names under which anyone can register a site."""
    return site_of(host) is None
