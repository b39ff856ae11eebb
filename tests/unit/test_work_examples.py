"""The work-layer example, and every Python block of README.md and docs/, run as shown."""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_work_quickstart_example(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["work_quickstart.py", str(tmp_path / "q.db")])
    runpy.run_path(str(ROOT / "examples" / "work_quickstart.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "fetch/ada    completed attempts=2" in out          # the timeout was retried
    assert "score/?x     dead" in out and "GiveUp: unknown customer id" in out
    assert "report/all   dead      attempts=0 dependency score/?x is dead" in out
    assert "{'total': 80}" in out


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PRINTS = re.compile(r"print\(.*\)\s+# prints: (.*)$")


def python_blocks(page: Path) -> list[str]:
    """The page's ```python blocks (a ```py block is shown, not run: it needs a service
    the tests do not start)."""
    return re.findall(r"```python\n(.*?)```", page.read_text(), re.S)


def expected_lines(block: str) -> list[re.Pattern[str]]:
    """What the block's ``print(...)  # prints: TEXT`` lines say they print, in order
    (``...`` in TEXT stands for anything)."""
    return [re.compile(".*".join(re.escape(part) for part in m.group(1).strip().split("..."))
                       + "$")
            for line in block.splitlines() if (m := PRINTS.search(line))]


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_python_block_runs_and_prints_what_it_says(page, tmp_path):
    for number, block in enumerate(python_blocks(page)):
        script = tmp_path / f"{page.stem}_{number}.py"
        script.write_text(block)
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{page.name} block {number} failed:\n{done.stderr}"
        printed = iter(done.stdout.splitlines())
        for pattern in expected_lines(block):
            assert any(pattern.match(line) for line in printed), (
                f"{page.name} block {number} did not print {pattern.pattern!r}:\n"
                f"{done.stdout}")


def test_the_front_door_and_each_api_page_have_examples_that_run():
    assert len(python_blocks(ROOT / "README.md")) >= 2        # tasks; an agent and a team
    for name in ("work", "agents", "teams", "fsm", "durable"):
        assert python_blocks(ROOT / "docs" / f"{name}.md"), f"docs/{name}.md has no example"


def test_every_example_is_listed():
    listed = (ROOT / "examples" / "README.md").read_text()
    for path in (ROOT / "examples").iterdir():
        if path.suffix in (".py", ".csv"):
            assert f"`{path.name}`" in listed, f"examples/README.md does not list {path.name}"


def test_the_readme_names_every_extra():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    readme = (ROOT / "README.md").read_text()
    listed = readme[readme.index("Extras:"):readme.index("## Quickstart")]
    assert [name for name in extras if f"`{name}`" not in listed] == []
