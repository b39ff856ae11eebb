"""The App that ``foreperson worker`` serves in the remote-worker test
(test_durable_remote.py): a team's ``researcher`` worker run in another process.

The researcher counts once (a side-effect tool writing to ``$FP_DURABLE_DIR/count.txt``),
then answers. The first process to reach its answer kills itself with SIGKILL instead
(a machine dying mid-run, after a finished step), leaving ``died`` in the directory.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from durable_agents import counter

from foreperson import Agent
from foreperson.models import ToolCall, ToolReturn
from foreperson.runtime import agent_app
from foreperson.testing import FunctionModel

WORKDIR = Path(os.environ.get("FP_DURABLE_DIR", "."))


def research(messages: Any, params: Any) -> Any:
    last = messages[-1]
    if not isinstance(last, ToolReturn):
        return ToolCall("count", {"who": "researcher"})
    died = WORKDIR / "died"
    if not died.exists():
        died.write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return f"3 sources, from process {os.getpid()}"


researcher = Agent("Find sources.", model=FunctionModel(research, name="researcher"),
                   name="researcher", tools=[counter(WORKDIR / "count.txt")])
app = agent_app({"researcher": researcher})
