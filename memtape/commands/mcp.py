"""`memtape mcp`: this memory as a Model Context Protocol server over stdio (memtape/mcp_server.py)."""

from __future__ import annotations

import click

from memtape.api import Memory
from memtape.commands.opening import open_memory
from memtape.mcp_server import build_server


@click.command("mcp")
def mcp_command() -> None:
    """Serve this memory to MCP clients over stdio (the Model Context Protocol).

    The client starts the command itself and talks JSON-RPC on its stdin/stdout. Tools:
    start_run, tier1, recall_domain, recall_error, record_step, record_lesson, observe_fact,
    finish_run, audit (the library's arguments, plus the run_id start_run returned).

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
    build_server(memory).run("stdio")  # the store is closed with the command's settings


COMMANDS = [mcp_command]
