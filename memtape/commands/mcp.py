"""`memtape mcp`: this memory as a Model Context Protocol server over stdio (memtape/mcp_server.py)."""

from __future__ import annotations

import click

from memtape.api import Memory
from memtape.commands import seeds_option
from memtape.commands.opening import open_memory
from memtape.mcp_server import build_server


@click.command("mcp")
@seeds_option
@click.option(
    "--tools",
    type=click.Choice(["compact", "all"]),
    default="compact",
    show_default=True,
    help="compact: the calls of a run and its audit; all: every call of the HTTP API (memtape/operations.py).",
)
def mcp_command(tools: str) -> None:
    """Serve this memory to MCP clients over stdio (the Model Context Protocol).

    The client starts the command itself and talks JSON-RPC on its stdin/stdout. Tools by
    default: start_run, tier1, recall_domain, recall_error, record_step, record_lesson,
    observe_fact, finish_run, search, audit, explain (the library's arguments, plus the run_id
    start_run returned); --tools all offers every call of the HTTP API as a tool.

    To connect Claude Desktop (claude_desktop_config.json) or any client that takes the same
    config, give the memory directory as an absolute path:

    \b
      {"mcpServers": {"memtape": {
          "command": "memtape",
          "args": ["--memory-dir", "/home/me/.agent-memory", "mcp"]}}}

    From Python: mcp.client.stdio.stdio_client(StdioServerParameters(command="memtape",
    args=["--memory-dir", DIR, "mcp"])).
    """
    memory = open_memory(Memory)
    # the store is closed with the command's settings
    build_server(memory, tools="all" if tools == "all" else "compact").run("stdio")


COMMANDS = [mcp_command]
