"""Entry point of the ``foreperson`` command.

Each command lives in its own module with a ``register(app)`` function; this module
only assembles them.
"""

from __future__ import annotations

import importlib
import sys

from ..errors import ForepersonError

COMMAND_MODULES = ["tickets", "worker", "status", "retry", "db"]


def build_app():
    """The typer application with every command registered.

    Raises:
        MissingDependency: typer / rich are not installed.
    """
    try:
        import typer
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        from ..errors import MissingDependency
        raise MissingDependency(
            "the foreperson command needs the cli extra: pip install 'foreperson[cli]'") from exc
    app = typer.Typer(
        name="foreperson",
        help="Supervisor / worker jobs with durable task records.\n\n"
             "Start with: foreperson tickets --help",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__package__}.{name}").register(app)
    return app


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for a usage or input error)."""
    try:
        app = build_app()
        code = app(args=argv, standalone_mode=False)
        if isinstance(code, int):       # typer.Exit(n) comes back as a return value
            return code
    except ForepersonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # typer/click exit codes
        return int(exc.code or 0)
    except Exception as exc:  # click usage errors arrive here in non-standalone mode
        import click
        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            return exc.exit_code
        if isinstance(exc, click.exceptions.Abort):
            print("aborted", file=sys.stderr)
            return 130
        raise
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
