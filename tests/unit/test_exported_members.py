"""The front door exports exactly its public names, each with a docstring."""

from __future__ import annotations

import importlib
import inspect

import pytest

import foreperson

PACKAGES = [
    "foreperson", "foreperson.work", "foreperson.work.stores", "foreperson.tickets",
    "foreperson.fsm", "foreperson.agents", "foreperson.models", "foreperson.errors",
    "foreperson.testing", "foreperson.journal", "foreperson.clock", "foreperson.retry",
    "foreperson.teams", "foreperson.runtime",
]


def _ours(value: object, module: object) -> bool:
    """Defined in ``module`` (or, for a package, in one of its modules), or a constant."""
    if inspect.isclass(value) or inspect.isfunction(value):
        home = getattr(value, "__module__", "") or ""
        name = module.__name__  # type: ignore[attr-defined]
        if hasattr(module, "__path__"):          # a package re-exports its modules' names
            return home == name or home.startswith(name + ".")
        return home == name
    return isinstance(value, (int, float, str, frozenset, tuple)) and not isinstance(value, bool)


@pytest.mark.parametrize("name", PACKAGES)
def test_all_matches_the_public_names(name):
    module = importlib.import_module(name)
    public = {n for n, v in vars(module).items()
              if not n.startswith("_") and not inspect.ismodule(v) and _ours(v, module)
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
    assert foreperson.teams.Supervisor is not foreperson.Supervisor
