"""`memtape serve`: the HTTP JSON API (memtape/server.py) on a local port."""
from __future__ import annotations

import click

from memtape.api import Memory
from memtape.commands import current_settings
from memtape.server import serve as serve_memory


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind (loopback unless told otherwise).")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="TCP port.")
@click.option("--token", envvar="MEMTAPE_TOKEN", default=None,
              help="Require `Authorization: Bearer TOKEN` on every request (env MEMTAPE_TOKEN).")
def serve(host: str, port: int, token: str | None) -> None:
    """Serve this memory as an HTTP JSON API for agents in any language.

    Connect: the OpenAPI document is at http://HOST:PORT/openapi.json (docs at /docs).
    Start a run with `POST /runs {"goal": ..., "start_url": ...}` -> {"run_id"}, record with
    `POST /runs/RUN/steps|lessons|facts|selectors|context`, recall with
    `GET /runs/RUN/recall/error?command=&error=`, `GET /runs/RUN/recall/domain`,
    `GET /runs/RUN/tier1`, finish with `POST /runs/RUN/finish {"success": true}`.

    Example: memtape --memory-dir .agent-memory serve --port 8765 --token s3cret
    """
    settings = current_settings()
    memory = Memory(settings.store(), settings.projections_path)
    click.echo(f"memtape: serving {settings.where()} on http://{host}:{port} (OpenAPI at /openapi.json)", err=True)
    try:
        serve_memory(memory, host=host, port=port, token=token)
    finally:
        memory.close()


COMMANDS = [serve]
