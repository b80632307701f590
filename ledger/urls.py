"""Store URLs as messages show them."""
from __future__ import annotations

import re


def display_url(url: str) -> str:
    """The URL without its password, for messages."""
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)
