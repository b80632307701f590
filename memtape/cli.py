"""The `memtape` command: global options, and the commands of `memtape.commands`.

A command's module is imported only when that command runs (or `--help` lists it), so
`memtape events` never loads the HTTP server (FastAPI) or the MCP SDK. Every error the
project knows becomes one line on stderr and exit 1.
"""
from __future__ import annotations

import importlib
import logging
import os
import sys

import click

from memtape.ledger.errors import LedgerError
from memtape.ledger.location import projections_file
from memtape.ledger.settings import Settings
from memtape.progress import fold_progress_bar
from memtape.projections.materialize import ProjectionsHead, fold_progress

#: command -> its module in memtape.commands
COMMAND_MODULES = {
    **dict.fromkeys(("append", "events", "verify", "stats", "schema", "copy"), "ledger"),
    **dict.fromkeys(("rebuild", "state", "runs", "diff"), "projections"),
    "forget": "forget",
    **dict.fromkeys(("import", "export"), "interop"),
    **dict.fromkeys(("run", "demo"), "agent"),
    **dict.fromkeys(("analytics", "report", "watch"), "analytics"),
    **dict.fromkeys(("experiment", "fork"), "experiment"),
    **dict.fromkeys(("audit", "explain"), "audit"),
    **dict.fromkeys(("start-run", "finish-run", "recall"), "runs"),
    "serve": "serve",
    "mcp": "mcp",
}


#: commands that only read memory: on a place with no ledger they say `no memory at DIR` and create nothing
READS_ONLY = frozenset({"events", "verify", "stats", "rebuild", "state", "runs", "diff", "analytics", "audit",
                        "explain", "experiment", "fork", "report", "watch", "export"})


class ReaderGone(Exception):
    """stdout's reader closed the pipe (`memtape events | head`)."""


class FaceGroup(click.Group):
    """The top-level group: loads a command's module when the command is asked for; a closed
    stdout leaves the command as `ReaderGone`, before click's own handler turns it into exit status 1."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        name = COMMAND_MODULES.get(cmd_name)
        if name is None:
            return None
        module = importlib.import_module(f"memtape.commands.{name}")
        return next(c for c in module.COMMANDS if c.name == cmd_name)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise ReaderGone() from None


@click.group(cls=FaceGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="memtape", prog_name="memtape", message="%(prog)s %(version)s")
@click.option("--memory-dir", envvar="MEMTAPE_DIR", default=None, metavar="DIR",
              help="Memory directory (env MEMTAPE_DIR, default .agent-memory).")
@click.option("--store", "store_url", envvar="MEMTAPE_STORE", default=None, metavar="URL",
              help="Ledger store (env MEMTAPE_STORE): postgresql://user@host/db, sqlite:///relative/ledger.db, "
                   "sqlite:////absolute/ledger.db or a bare path; default DIR/ledger.db.")
@click.pass_context
def cli(ctx: click.Context, memory_dir: str | None, store_url: str | None) -> None:
    """memtape: an event-sourced memory ledger for LLM browser agents."""
    settings = Settings(memory=memory_dir, store_url=store_url, reads_only=ctx.invoked_subcommand in READS_ONLY,
                        keeper_factories=[_projections_head])
    ctx.obj = settings
    ctx.call_on_close(settings.close)
    progress = fold_progress.set(ctx.with_resource(fold_progress_bar()))
    ctx.call_on_close(lambda: fold_progress.reset(progress))


def _projections_head(settings: Settings) -> ProjectionsHead:
    """projections.db remembers the head it saw too (see ledger.anchor)."""
    return ProjectionsHead(projections_file(settings.store()))


class _Warnings(logging.Handler):
    """The library's one-line warnings (logger `memtape`) as `warning: ...` on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"warning: {record.getMessage()}", err=True)


_log = logging.getLogger("memtape")
_log.addHandler(_Warnings())
_log.propagate = False


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="memtape", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("error: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        message = " ".join(exc.format_message().split("\n"))  # a value with a newline must not break the one line
        click.echo(f"error: {message}", err=True)
        sys.exit(exc.exit_code if exc.exit_code else 2)
    except LedgerError as exc:
        click.echo(f"error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except (ReaderGone, BrokenPipeError):
        _quiet_broken_pipe()
    except ValueError as exc:
        if "null byte" not in str(exc):  # a path with a NUL (only reachable in-process); anything else is a bug
            _internal_error(exc)
        click.echo("error: a path or argument contains a NUL character", err=True)
        sys.exit(1)
    except OSError as exc:
        click.echo(f"error: {exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""), err=True)
        sys.exit(1)
    except Exception as exc:
        _internal_error(exc)


def _quiet_broken_pipe() -> None:
    """The reader went away (`memtape events | head`): not an error. Point stdout at /dev/null so
    that Python's final flush does not complain, and exit 0."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file descriptor (captured in-process)
        pass
    finally:
        os.close(devnull)
    sys.exit(0)


def _internal_error(exc: Exception) -> None:
    """A bug is still one line (the seq, when a fold names one); MEMTAPE_DEBUG=1 shows the traceback."""
    if os.environ.get("MEMTAPE_DEBUG"):
        raise exc
    reason = " ".join(str(exc).split())[:200]
    click.echo(f"error: internal error ({type(exc).__name__}{': ' + reason if reason else ''}); "
               "set MEMTAPE_DEBUG=1 to see the traceback", err=True)
    sys.exit(1)
