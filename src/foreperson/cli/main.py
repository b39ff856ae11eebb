"""Entry point of the ``foreperson`` command.

Each command lives in its own module with a ``register(app)`` function; this module
only assembles them and turns errors into one line and an exit status: 2 for a usage
or input error (what to fix is in the message), 1 for a failure of the run, 130 when
interrupted.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from ..errors import ConfigurationError, ForepersonError

COMMAND_MODULES = [
    "tickets", "worker", "status", "retry", "serve", "db", "fsm", "runs", "mcp", "a2a",
]


def _version(value: bool) -> None:
    if value:
        from .. import __version__
        print(f"foreperson {__version__}")
        raise SystemExit(0)


def build_app() -> Any:
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
        rich_markup_mode="markdown",     # docstring paragraphs re-wrap to the terminal
    )

    @app.callback()
    def _root(version: bool = typer.Option(False, "--version", callback=_version,
                                           is_eager=True, help="Print the version.")) -> None:
        """Supervisor / worker jobs with durable task records."""

    for name in COMMAND_MODULES:
        importlib.import_module(f"{__package__}.{name}").register(app)
    return app


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    try:
        build_app()(args=argv, prog_name="foreperson")   # standalone: usage errors exit 2
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except ConfigurationError as exc:       # the user can fix it: a usage error
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ForepersonError as exc:          # the run failed
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
