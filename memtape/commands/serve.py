"""`memtape serve`: the HTTP JSON API (memtape/server.py) and its web viewer on a local port;
`memtape ui`: the same on a free loopback port, the viewer opened in a browser."""

from __future__ import annotations

import webbrowser
from urllib.parse import quote

import click

from memtape.api import Memory
from memtape.commands import current_settings, seeds_option
from memtape.commands.opening import open_memory
from memtape.http_guard import ServeRefused, checked_token, is_loopback, load_token, token_file
from memtape.progress import warm_up_line
from memtape.projections.seeds import choose_seeds
from memtape.server import chosen_parser
from memtape.server import serve as serve_memory


@click.command("serve")
@seeds_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind (loopback unless told otherwise; any other needs a token).",
)
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="TCP port.")
@click.option(
    "--token",
    envvar="MEMTAPE_TOKEN",
    default=None,
    help="The bearer token to require (env MEMTAPE_TOKEN); default: the one in DIR/serve.token, made on first start.",
)
@click.option(
    "--no-token",
    is_flag=True,
    help="Require no token (loopback only): any process or user on this machine can then read and write.",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="Also answer requests whose Host header is NAME (a reverse proxy's name; repeatable).",
)
@click.option(
    "--cors-origin",
    "cors_origins",
    multiple=True,
    metavar="ORIGIN",
    help="Let web pages of ORIGIN (e.g. http://localhost:3000) call the API, with CORS (repeatable).",
)
@click.option(
    "--http",
    "parser",
    type=click.Choice(["httptools", "h11"]),
    default=None,
    help="The HTTP/1.1 parser: httptools (the default where it is installed, the faster) or h11.",
)
def serve(
    host: str,
    port: int,
    token: str | None,
    no_token: bool,
    allow_hosts: tuple[str, ...],
    cors_origins: tuple[str, ...],
    parser: str | None,
) -> None:
    """Serve this memory as an HTTP JSON API for agents in any language.

    Connect: the OpenAPI document is at http://HOST:PORT/openapi.json (docs at /docs). Every other
    request needs `Authorization: Bearer TOKEN`: the token is made on first start, kept in
    DIR/serve.token (mode 0600) and printed with the URL. Bodies are application/json
    (`POST /events`: application/x-ndjson). Requests naming another Host, or sent by a web page of
    another origin, are refused (see --allow-host, --cors-origin).

    Start a run with `POST /runs {"goal": ..., "start_url": ...}` -> {"run_id"}, record with
    `POST /runs/RUN/steps|lessons|facts|selectors|context`, recall with
    `GET /runs/RUN/recall/error?command=&error=`, `GET /runs/RUN/recall/domain`,
    `GET /runs/RUN/tier1`, finish with `POST /runs/RUN/finish {"success": true}`.

    Example: memtape --memory-dir .agent-memory serve --port 8765
    """
    _serve(host, port, token, no_token, allow_hosts, cors_origins, open_browser=False, parser=parser)


def login_link(url: str, token: str | None) -> str:
    """The viewer's address: with the token, the login link that sets its cookie (memtape/viewer/gate.py)."""
    return f"{url}/ui/" + (f"?token={quote(token, safe='')}" if token is not None else "")


def _serve(
    host: str,
    port: int,
    token: str | None,
    no_token: bool,
    allow_hosts: tuple[str, ...],
    cors_origins: tuple[str, ...],
    *,
    open_browser: bool,
    parser: str | None = None,
) -> None:
    """`serve` and `ui` alike: check the token options, bind, announce the API and the viewer's link."""
    if no_token and token is not None:
        raise ServeRefused("--no-token and a token (--token or MEMTAPE_TOKEN): choose one")
    if no_token and not is_loopback(host):
        raise ServeRefused(f"--no-token is allowed only on a loopback host (127.0.0.1, ::1, localhost), not {host!r}")
    chosen_parser(parser)  # an --http not installed is refused before the token file is written
    settings = current_settings()
    choose_seeds(settings.seeds)  # a bad --seeds is refused before the token file is written
    kept = token is None and not no_token
    secret = None if no_token else checked_token(token, "--token") if token is not None else None
    created = False
    if kept:
        secret, created = load_token(settings.dir)
    memory = open_memory(Memory)
    typed = click.get_current_context().get_parameter_source("token") == click.core.ParameterSource.COMMANDLINE

    def announce(url: str) -> None:
        click.echo(f"memtape: serving {settings.where()} on {url} (OpenAPI at /openapi.json)", err=True)
        if typed:  # a command line is in the process list, which every local user can read
            click.echo(
                "memtape: warning: a token given with --token can be read by other users on this machine "
                f"(the process list); set MEMTAPE_TOKEN or keep it in {token_file(settings.dir)} (mode 0600) instead",
                err=True,
            )
        if no_token:
            click.echo(
                "memtape: warning: no token (--no-token): any process or user on this machine can read "
                "and write this memory",
                err=True,
            )
        elif kept:
            made = "made and kept" if created else "kept"
            click.echo(
                f"memtape: token ({made} in {token_file(settings.dir)}): send Authorization: Bearer {secret}", err=True
            )
        if kept or no_token:
            link = login_link(url, secret)
            click.echo(f"memtape: viewer: {link}", err=True)
            if open_browser:
                _open(link)
        else:  # a token the user gave is never printed
            click.echo(f"memtape: viewer: {url}/ui/?token=TOKEN (the token given)", err=True)

    with warm_up_line() as progress:  # the line ends before the server speaks
        serve_memory(
            memory,
            host=host,
            port=port,
            token=secret,
            allow_hosts=allow_hosts,
            cors_origins=cors_origins,
            announce=announce,
            progress=progress,
            parser=parser,
        )  # the store is closed with the command's settings, its head remembered


def _open(link: str) -> None:
    """Open `link` in this machine's browser where there is one; say so where there is none."""
    try:
        opened = webbrowser.get().open(link)
    except webbrowser.Error:
        opened = False
    if not opened:
        click.echo("memtape: no browser to open here: open the viewer link above", err=True)


@click.command("ui")
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535), help="TCP port (0: a free one).")
@click.option("--no-browser", is_flag=True, help="Print the viewer's link without opening a browser.")
def ui(port: int, no_browser: bool) -> None:
    """Open the web viewer of this memory: `serve` on a loopback port, the browser on its link.

    The viewer shows runs, each step with what the agent knew then, every item's life, a diff of
    memory between two points (a seq, an ISO time or a run id) and a search. It is served by
    `memtape serve` under /ui/ too; its link carries the server's token, kept in DIR/serve.token.

    Example: memtape --memory-dir .agent-memory ui
    """
    _serve("127.0.0.1", port, None, False, (), (), open_browser=not no_browser)


COMMANDS = [serve, ui]
