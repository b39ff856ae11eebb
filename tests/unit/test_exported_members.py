"""The front door exports exactly its public names, each with a docstring."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import foreperson

SRC = Path(__file__).resolve().parents[2] / "src"


def public_modules() -> list[str]:
    """Every module of the package with no private part in its name, but the command
    line's (its surface is the ``foreperson`` command and its ``--help``)."""
    names = []
    for path in sorted((SRC / "foreperson").rglob("*.py")):
        parts = [p for p in path.relative_to(SRC).with_suffix("").parts if p != "__init__"]
        if not any(p.startswith("_") for p in parts) and parts[:2] != ["foreperson", "cli"]:
            names.append(".".join(parts))
    return names


PACKAGES = public_modules()


def _assigned(module: object) -> set[str]:
    """Names a module's own source assigns at its top level (its constants)."""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))  # type: ignore[attr-defined]
    names = set()
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _ours(attr: str, value: object, module: object) -> bool:
    """Defined in ``module`` (or, for a package, in one of its modules): a class or a
    function whose home it is, or a constant its source assigns (a package: any)."""
    package = hasattr(module, "__path__")        # a package re-exports its modules' names
    if inspect.isclass(value) or inspect.isfunction(value):
        home = getattr(value, "__module__", "") or ""
        name = module.__name__  # type: ignore[attr-defined]
        return home == name or (package and home.startswith(name + "."))
    constant = (isinstance(value, (int, float, str, frozenset, tuple))
                and not isinstance(value, bool))
    return constant and (package or attr in _assigned(module))


@pytest.mark.parametrize("name", PACKAGES)
def test_all_matches_the_public_names(name):
    module = importlib.import_module(name)
    public = {n for n, v in vars(module).items()
              if not n.startswith("_") and not inspect.ismodule(v) and _ours(n, v, module)
              and n not in {"annotations", "TYPE_CHECKING"}}
    missing = public - set(module.__all__)
    assert not missing, f"{name}: public but not in __all__ (export or make private): {missing}"
    absent = [n for n in module.__all__ if not hasattr(module, n)]
    assert not absent, f"{name}: __all__ names what the module lacks: {absent}"


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_name_is_documented(name):
    module = importlib.import_module(name)
    for attr in module.__all__:
        obj = getattr(module, attr)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{name}.{attr} has no docstring"


def test_version():
    assert foreperson.__version__


def test_the_front_door_keeps_the_work_layers_supervisor_and_adds_team():
    import foreperson.teams
    import foreperson.work

    assert foreperson.Supervisor is foreperson.work.Supervisor
    assert foreperson.Team is foreperson.teams.Team
    assert foreperson.teams.TeamSupervisor is not foreperson.Supervisor
    with pytest.warns(DeprecationWarning, match="now foreperson.teams.TeamSupervisor"):
        assert foreperson.teams.Supervisor is foreperson.teams.TeamSupervisor
