"""The bundled sites' server: a browser hanging up mid-answer prints nothing over the demo's table,
while a real fault in a handler is still reported."""

from __future__ import annotations

import pytest

from memtape.agent.sites.server import SitesServer


@pytest.mark.parametrize("fault", [BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset")])
def test_a_client_that_hung_up_is_no_error(fault: Exception, capsys: pytest.CaptureFixture[str]) -> None:
    sites = SitesServer()
    try:
        try:
            raise fault
        except ConnectionError:
            sites.httpd.handle_error(None, ("127.0.0.1", 1))
    finally:
        sites.httpd.server_close()
    assert capsys.readouterr().err == ""


def test_a_handler_fault_is_still_reported(capsys: pytest.CaptureFixture[str]) -> None:
    sites = SitesServer()
    try:
        try:
            raise ValueError("a bug in a page handler")
        except ValueError:
            sites.httpd.handle_error(None, ("127.0.0.1", 1))
    finally:
        sites.httpd.server_close()
    assert "ValueError: a bug in a page handler" in capsys.readouterr().err
