"""The work-layer example and the README's Python block run as shown."""

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


@pytest.mark.slow
def test_readme_python_blocks_run(tmp_path):
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert blocks, "README.md lost its Python examples"
    for number, block in enumerate(blocks):
        script = tmp_path / f"readme_{number}.py"
        script.write_text(block)
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"README block {number} failed:\n{done.stderr}"
    assert (tmp_path / "jobs.db").exists()


def test_every_example_is_listed():
    listed = (ROOT / "examples" / "README.md").read_text()
    for path in (ROOT / "examples").iterdir():
        if path.suffix in (".py", ".csv"):
            assert f"`{path.name}`" in listed, f"examples/README.md does not list {path.name}"
