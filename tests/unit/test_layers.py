"""The layers of docs/architecture.md hold: each part of the package imports only the
layers below it (nothing back up, no circle), the ground floor imports nothing of the
package, library code never imports ``foreperson.testing``, and no part imports another
part's private module. Read from the source (every import, in functions too), so an
import cannot hide behind laziness."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

LAYERS = [
    {"errors", "clock", "_lazy"},                      # the ground floor
    {"retry", "journal", "telemetry"},                 # telemetry redacts with errors
    {"work"},
    {"models"},
    {"agents"},
    {"teams", "fsm", "runtime", "tickets"},
    {"observe"},
    {"protocols"},                         # MCP and A2A servers (on observe's HTTP edge)
    {"cli"},
    {"testing", "__main__"},
]
LAYER_OF = {part: level for level, parts in enumerate(LAYERS) for part in parts}


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """``(absolute module, names)`` of each ``foreperson`` import in ``path``."""
    module = list(path.relative_to(SRC).with_suffix("").parts)
    package = module[:-1] if module[-1] != "__init__" else module[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((target, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
    return [(t, names) for t, names in found if t.split(".")[0] == "foreperson"]


def part_of(path: Path) -> str:
    parts = path.relative_to(SRC / "foreperson").with_suffix("").parts
    return parts[0]


def violations() -> list[str]:
    found = []
    for path in sorted((SRC / "foreperson").rglob("*.py")):
        mine = part_of(path)
        if mine == "__init__":               # the front door re-exports every layer
            continue
        for target, names in imports(path):
            parts = target.split(".")
            # ``from foreperson import telemetry`` names a module; __version__ is metadata
            targets = ([f"foreperson.{n}" for n in names if n != "__version__"]
                       if len(parts) == 1 else [target])
            for one in targets:
                theirs = one.split(".")[1]
                if theirs == mine:
                    continue
                where = f"{path.relative_to(SRC)} imports {one}"
                if LAYER_OF[theirs] >= LAYER_OF[mine]:
                    found.append(f"{where}: {theirs} is not below {mine}")
                if any(p.startswith("_") and p != "__init__" for p in one.split(".")[2:]):
                    found.append(f"{where}: a private module of {theirs}")
    return found


def test_every_part_of_the_package_has_a_layer():
    parts = {part_of(p) for p in (SRC / "foreperson").rglob("*.py")} - {"__init__"}
    assert parts <= set(LAYER_OF), f"no layer for {parts - set(LAYER_OF)}"


def test_each_layer_imports_only_those_below_it_and_only_their_public_modules():
    assert violations() == []


def test_the_check_sees_an_import_back_up(tmp_path, monkeypatch):
    fake = tmp_path / "foreperson"
    (fake / "errors.py").parent.mkdir()
    (fake / "errors.py").write_text("def f():\n    from .work.task import Task\n")
    (fake / "work").mkdir()
    (fake / "work" / "loop.py").write_text("from ..agents._steps import first\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path)
    assert violations() == [
        "foreperson/errors.py imports foreperson.work.task: work is not below errors",
        "foreperson/work/loop.py imports foreperson.agents._steps: agents is not below work",
        "foreperson/work/loop.py imports foreperson.agents._steps: a private module of "
        "agents"]
