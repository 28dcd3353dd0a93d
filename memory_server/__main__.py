"""``python -m memory_server …``: the ``mirage memory`` commands without the rest of the CLI
(used to spawn stdio servers from tests and MCP client configs)."""

from memory_server.cli import memory_app

if __name__ == "__main__":
    memory_app(prog_name="python -m memory_server")
