"""``foreperson mcp``: serve an Agent, a Team or a Machine over MCP (being written)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the ``mcp`` command group to ``app``."""
    group = typer.Typer(help="Serve an Agent, a Team or a Machine over MCP.",
                        no_args_is_help=True)

    @group.command("serve")
    def serve() -> None:
        """Not written yet."""
        raise typer.Exit(2)

    app.add_typer(group, name="mcp")
