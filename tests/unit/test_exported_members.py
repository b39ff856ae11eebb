"""The front door exports exactly its public names, each with a docstring."""

from __future__ import annotations

import importlib
import inspect

import pytest

import foreperson

PACKAGES = ["foreperson", "foreperson.work", "foreperson.work.stores", "foreperson.tickets",
            "foreperson.teams"]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_matches_the_public_names(name):
    module = importlib.import_module(name)
    public = {n for n, v in vars(module).items()
              if not n.startswith("_") and not inspect.ismodule(v)
              and n not in {"annotations"}}
    assert set(module.__all__) == public, "update __all__ or make the name private"


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
