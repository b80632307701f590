"""The `memtape` command: global options, and the commands of `memtape.commands`.

A command's module is imported only when that command runs, so `memtape events` never loads
the HTTP server (FastAPI) or the MCP SDK, and `memtape --help` lists every command from the
summaries below without importing any (tests/test_cli_startup.py keeps them equal to the
commands' own). A command whose extra is not installed says which in one line. Every error the
project knows becomes one line on stderr and exit 1.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import NamedTuple

import click
from click.utils import make_default_short_help

from memtape.ledger.errors import LedgerError
from memtape.ledger.extras import MissingExtra, require


class Entry(NamedTuple):
    """Where a command lives and what `--help` says of it, known without importing it."""

    module: str  #: its module in memtape.commands
    summary: str  #: its short help (click shortens it to the terminal's width)
    extra: str | None = None  #: the extra (pyproject.toml) whose packages its module imports


#: command -> its entry, in the order `--help` lists them
COMMANDS: dict[str, Entry] = {
    "analytics": Entry(
        "analytics",
        "DuckDB analytics over the ledger (every subcommand takes --format table|json|csv|parquet).",
        "analytics",
    ),
    "append": Entry("ledger", "Append JSON Lines events (one per line, payload fields at top level)."),
    "audit": Entry(
        "audit",
        "What the agent knew at each step of RUN: prompt items, memory as of the step, the action — and "
        "for every item the run and step that taught it.",
    ),
    "copy": Entry("ledger", "Copy a ledger between stores, rows verbatim, chain verified at the end."),
    "credit": Entry(
        "credit",
        "Credit every memory item by counterfactual: ask each decision's policy again without each item it "
        "was shown, and run the task again where one changed a decision; record item_credited events.",
        "agent",
    ),
    "demo": Entry(
        "agent",
        "Serve the bundled sites and run the suite with memory off, then twice with memory on; print "
        "passes, turns, policy decisions, tokens and memory's share of step time.",
        "agent",
    ),
    "diff": Entry("projections", "What memory gained, lost, promoted and decayed between two points of the log."),
    "events": Entry("ledger", "Print events in seq order, filtered."),
    "experiment": Entry(
        "experiment", "Replay the log's observations under a changed policy and diff against what really happened."
    ),
    "explain": Entry(
        "audit",
        "The whole life of one lesson, fact (id or key), selector or trajectory: recorded, deduplicated, "
        "recalled (in which runs), promoted, decayed, pruned, forgotten.",
    ),
    "export": Entry(
        "interop", "Export memory in another agent's format: bad, mycompagent or Trayn (files 0600, directories 0700)."
    ),
    "finish-run": Entry(
        "runs",
        "Finish RUN: post-run learning from its recorded steps (lessons, facts, selectors, the trajectory "
        "of a success), the session entry, graded steps and run_completed.",
    ),
    "forget": Entry(
        "forget",
        "Forget one subject: append `subject_forgotten`, so no projection, export, report or audit answer "
        "holds it any more, scrub projections.db (old snapshots, free pages, WAL) and drop the analytics "
        "mirror (rebuilt without the subject by the next analytics command).",
    ),
    "fork": Entry(
        "experiment", "A new ledger with the events up to SEQ, rows verbatim so the hash chain verifies (for A/B runs)."
    ),
    "import": Entry(
        "interop",
        "Import another agent's memory: mycompagent's memory.json or memory_events.jsonl logs, bad's "
        ".agent-memory folder, or Trayn's JSON export (refused whole if any file is malformed; twice = once).",
    ),
    "lessons": Entry(
        "lessons",
        "A person's commands over lessons: `lessons pin LESSON` puts one into Tier 1 (every system "
        "prompt), `lessons unpin LESSON` takes one out; each recorded with who and why.",
    ),
    "mcp": Entry("mcp", "Serve this memory to MCP clients over stdio (the Model Context Protocol).", "mcp"),
    "rebuild": Entry("projections", "Rebuild projections.db from the ledger, with a progress bar."),
    "recall": Entry("runs", "Recall memory as the library does (each recall is logged as an event)."),
    "report": Entry("analytics", "A self-contained HTML page with PNG plots of every analysis.", "analytics"),
    "run": Entry("agent", "Run the browser agent on a goal or a cases file, with memory.", "agent"),
    "runs": Entry("projections", "List run manifests, newest first (what `bad runs` lists from bad's .agent-memory)."),
    "schema": Entry("ledger", "Print the JSON Schema of every event type (or one)."),
    "search": Entry(
        "search",
        "Search memory by words (lessons, facts, patterns, selectors, trajectories, sessions, context), best "
        "first; logged as a memory_searched event.",
    ),
    "serve": Entry("serve", "Serve this memory as an HTTP JSON API for agents in any language.", "server"),
    "start-run": Entry(
        "runs",
        "Start a run and print its id: stale runs are abandoned, then the start-of-run policy (seeds on "
        "first use, pruning, trajectory expiry) and run_started are written together.",
    ),
    "state": Entry("projections", "Show one projection's current (or past) state, or a page of it."),
    "stats": Entry("ledger", "Counts by type, domain and run; file size; time span."),
    "ui": Entry(
        "serve", "Open the web viewer of this memory: `serve` on a loopback port, the browser on its link.", "server"
    ),
    "verify": Entry(
        "ledger", "Walk the hash chain and check the remembered head; exit 1 naming the first bad or missing seq."
    ),
    "watch": Entry(
        "analytics",
        "Follow the ledger, keep projections.db current and print what each new event changed.",
        "analytics",
    ),
}

#: command -> its module in memtape.commands
COMMAND_MODULES = {name: entry.module for name, entry in COMMANDS.items()}


class ReaderGone(Exception):
    """stdout's reader closed the pipe (`memtape events | head`)."""


class FaceGroup(click.Group):
    """The top-level group: lists the commands from COMMANDS, loads a command's module when the
    command is asked for (after checking its extra is installed); a closed stdout leaves the command
    as `ReaderGone`, before click's own handler turns it into exit status 1."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        if entry.extra is not None:
            require(cmd_name, entry.extra)
        module = importlib.import_module(f"memtape.commands.{entry.module}")
        return next(c for c in module.COMMANDS if c.name == cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing, from the summaries: `--help` imports no command's module."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))
        with formatter.section("Commands"):
            formatter.write_dl([(name, make_default_short_help(COMMANDS[name].summary, limit)) for name in names])

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise ReaderGone() from None


@click.group(cls=FaceGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="memtape", prog_name="memtape", message="%(prog)s %(version)s")
@click.option(
    "--memory-dir",
    envvar="MEMTAPE_DIR",
    default=None,
    metavar="DIR",
    help="Memory directory (env MEMTAPE_DIR, default .agent-memory).",
)
@click.option(
    "--store",
    "store_url",
    envvar="MEMTAPE_STORE",
    default=None,
    metavar="URL",
    help="Ledger store (env MEMTAPE_STORE): postgresql://user@host/db, sqlite:///relative/ledger.db, "
    "sqlite:////absolute/ledger.db or a bare path; default DIR/ledger.db.",
)
@click.option(
    "--seeds",
    envvar="MEMTAPE_SEEDS",
    default=None,
    metavar="default|none|browser-use|FILE",
    help="Seed lessons a new memory starts with (env MEMTAPE_SEEDS): the seed documents' (default), none, "
    "browser-use's, or a JSON file of your own; written by the memory's first run.",
)
def cli(memory_dir: str | None, store_url: str | None, seeds: str | None) -> None:
    """memtape: an event-sourced memory ledger for LLM browser agents."""
    # the options stay in the context's params: a command that opens memory builds its Settings
    # from them (memtape.commands.current_settings), so a command that does not pays nothing


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
    except MissingExtra as exc:
        click.echo(str(exc), err=True)  # the line itself says what is wrong and what to run
        sys.exit(1)
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
    click.echo(
        f"error: internal error ({type(exc).__name__}{': ' + reason if reason else ''}); "
        "set MEMTAPE_DEBUG=1 to see the traceback",
        err=True,
    )
    sys.exit(1)
