"""Domain scope by the public-suffix list bundled in tldextract (no network): a scope that is a
public suffix is refused in one line; matching stops at the registrable domain."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memtape.ledger import suffixes
from memtape.ledger.envelope import event
from memtape.ledger.events import LessonRecorded
from memtape.ledger.store import SqliteStore
from memtape.ledger.suffixes import is_public_suffix, site_of
from memtape.projections.text import domain_matches, parent_domains
from memtape.projections.view import MemoryView
from tests.cli_runner import run_cli


def test_sites_come_from_the_bundled_list_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object) -> None:
        raise AssertionError("the public-suffix list must not be fetched")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    suffixes._extract.cache_clear()
    site_of.cache_clear()
    assert site_of("www.amazon.co.uk") == "amazon.co.uk" and site_of("a.b.github.io") == "b.github.io"
    assert [is_public_suffix(h) for h in ("com", "co.uk", "github.io", "amazon.com", "shop.test")] == [
        True,
        True,
        True,
        False,
        False,
    ]
    assert site_of("www.shop.test:8080") == "shop.test" and site_of("127.0.0.1") == "127.0.0.1"


def test_matching_stops_at_the_registrable_domain() -> None:
    assert domain_matches("www.amazon.com", "amazon.com") and domain_matches("a.b.shop.test", "b.shop.test")
    assert not domain_matches("a.co.uk", "co.uk") and not domain_matches("a.co.uk", "b.co.uk")
    assert not domain_matches("www.amazon.com", "com") and not domain_matches("a.github.io", "github.io")
    assert parent_domains("www.amazon.com") == ["www.amazon.com", "amazon.com"]
    assert parent_domains("a.co.uk") == ["a.co.uk"]
    assert parent_domains("x.y.z.blogspot.com") == ["x.y.z.blogspot.com", "y.z.blogspot.com", "z.blogspot.com"]


LABEL = st.sampled_from(["a", "b", "www", "shop", "co", "uk", "com", "github", "io", "test", "amazon", "blogspot"])
HOST = st.lists(LABEL, min_size=1, max_size=4).map(".".join)


@given(HOST, HOST)
def test_a_scope_never_reaches_past_the_hosts_site(host: str, scope: str) -> None:
    if domain_matches(host, scope) and host != scope:
        assert not is_public_suffix(scope) and site_of(scope) == site_of(host)
    if is_public_suffix(scope) and host != scope:
        assert not domain_matches(host, scope)
    assert all(not is_public_suffix(p) for p in parent_domains(host)[1:])


@pytest.mark.parametrize("scope", ["com", "co.uk", "github.io", "COM"])
def test_a_public_suffix_scope_is_refused_in_one_line(tmp_path: Path, scope: str) -> None:
    line = (
        '{"type":"lesson_recorded","lesson_id":"l1","lesson":"Accept cookies first","category":"site_specific",'
        f'"scope_domain":"{scope}"}}\n'
    ).encode()
    r = run_cli("--memory-dir", str(tmp_path / "m"), "append", "-", stdin=line)
    assert r.code == 1 and r.err.count("\n") == 1
    assert f"scope '{scope.lower()}' is a public suffix" in r.err and not (tmp_path / "m").exists()
    with pytest.raises(ValueError, match="public suffix"):
        LessonRecorded(lesson_id="l1", lesson="x", category="site_specific", scope_domain=scope)


def test_recall_on_domain_keeps_sites_apart(tmp_path: Path) -> None:
    with SqliteStore.open(tmp_path / "ledger.db") as store:
        store.append(
            [
                event(
                    LessonRecorded(
                        lesson_id=f"l_{site}",
                        lesson=f"On {site}, accept cookies first",
                        category="site_specific",
                        scope_domain=site,
                    )
                )
                for site in ("a.co.uk", "amazon.com", "b.github.io")
            ]
        )
        view = MemoryView.from_events(store.read())
        assert [l.lesson_id for l in view.recall_on_domain("www.a.co.uk")] == ["l_a.co.uk"]
        assert view.recall_on_domain("b.co.uk") == [] and view.recall_on_domain("c.github.io") == []
        assert [l.lesson_id for l in view.recall_on_domain("smile.amazon.com")] == ["l_amazon.com"]
