"""``foreperson a2a``: serve an Agent, a Team or a Machine over A2A (being written)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the ``a2a`` command group to ``app``."""
    group = typer.Typer(help="Serve an Agent, a Team or a Machine over A2A.",
                        no_args_is_help=True)

    @group.command("serve")
    def serve() -> None:
        """Not written yet."""
        raise typer.Exit(2)

    app.add_typer(group, name="a2a")
