"""Bundled local sites with real-world quirks, and the cases that exercise them."""

from memtape.agent.sites.server import (
    CASES_FILE,
    HOSTILE_CASES_FILE,
    HOSTS,
    MEMORY_CASES_FILE,
    SitesServer,
    is_bundled,
    load_cases,
)

__all__ = ["CASES_FILE", "HOSTILE_CASES_FILE", "HOSTS", "MEMORY_CASES_FILE", "SitesServer", "is_bundled", "load_cases"]
