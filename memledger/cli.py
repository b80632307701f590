"""The `memledger` command: global options, and each layer's commands.

Each layer owns its commands (`ledger.commands`, `projections.commands`,
`agent.commands`, `analytics.commands`); this module only assembles them, so
that `ledger` never imports the layers above it. Every error the project
knows becomes one line on stderr and exit 1.
"""
from __future__ import annotations

import importlib
import logging
import os
import sys

import click

from memledger.ledger.errors import LedgerError
from memledger.ledger.settings import Settings
from memledger.mcp_server import COMMANDS as MCP_COMMANDS
from memledger.run_commands import COMMANDS as RUN_COMMANDS
from memledger.serve_command import COMMANDS as SERVE_COMMANDS

LAYERS = ("memledger.ledger.commands", "memledger.projections.commands", "memledger.agent.commands", "memledger.analytics.commands",
          "memledger.projections.interop.commands", "memledger.projections.forget_command")


#: commands that only read memory: on a place with no ledger they say `no memory at DIR` and create nothing
READS_ONLY = frozenset({"events", "verify", "stats", "rebuild", "state", "runs", "diff", "analytics", "audit",
                        "explain", "experiment", "fork", "report", "watch", "export"})


class ReaderGone(Exception):
    """stdout's reader closed the pipe (`memledger events | head`)."""


class FaceGroup(click.Group):
    """The top-level group; a closed stdout leaves the command as `ReaderGone`, before click's own
    handler turns it into exit status 1."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise ReaderGone() from None


@click.group(cls=FaceGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="memledger", prog_name="memledger", message="%(prog)s %(version)s")
@click.option("--memory-dir", envvar="MEMLEDGER_DIR", default=None, metavar="DIR",
              help="Memory directory (env MEMLEDGER_DIR, default .agent-memory).")
@click.option("--store", "store_url", envvar="MEMLEDGER_STORE", default=None, metavar="URL",
              help="Ledger store (env MEMLEDGER_STORE): postgresql://user@host/db, sqlite:///relative/ledger.db, "
                   "sqlite:////absolute/ledger.db or a bare path; default DIR/ledger.db.")
@click.pass_context
def cli(ctx: click.Context, memory_dir: str | None, store_url: str | None) -> None:
    """memledger: an event-sourced memory ledger for LLM browser agents."""
    settings = Settings(memory=memory_dir, store_url=store_url, reads_only=ctx.invoked_subcommand in READS_ONLY)
    hook = getattr(_optional("memledger.projections.writer"), "policy_writer", None)
    if hook is not None:
        settings.writer = hook
    keeper = getattr(_optional("memledger.projections.materialize"), "ProjectionsHead", None)
    if keeper is not None:
        settings.keeper_factories.append(lambda s: keeper(s.projections_path))
    settings.decision_check = getattr(_optional("memledger.projections.replay"), "verify_decisions", None)
    ctx.obj = settings
    ctx.call_on_close(settings.close)


def _optional(name: str):  # type: ignore[no-untyped-def]
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and name.startswith(exc.name):
            return None
        raise


for _layer in LAYERS:
    _module = _optional(_layer)
    for _command in getattr(_module, "COMMANDS", []):
        cli.add_command(_command)
for _command in [*RUN_COMMANDS, *SERVE_COMMANDS, *MCP_COMMANDS]:
    cli.add_command(_command)


class _Warnings(logging.Handler):
    """The library's one-line warnings (logger `memledger`) as `warning: ...` on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"warning: {record.getMessage()}", err=True)


_log = logging.getLogger("memledger")
_log.addHandler(_Warnings())
_log.propagate = False


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="memledger", standalone_mode=False)
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
    """The reader went away (`memledger events | head`): not an error. Point stdout at /dev/null so
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
    """A bug is still one line (the seq, when a fold names one); MEMLEDGER_DEBUG=1 shows the traceback."""
    if os.environ.get("MEMLEDGER_DEBUG"):
        raise exc
    reason = " ".join(str(exc).split())[:200]
    click.echo(f"error: internal error ({type(exc).__name__}{': ' + reason if reason else ''}); "
               "set MEMLEDGER_DEBUG=1 to see the traceback", err=True)
    sys.exit(1)
