"""The ecosystem's protocols, served: an ``Agent``, a ``Team`` or a ``Machine`` published
as a Model Context Protocol server (:mod:`foreperson.protocols.mcp`) or as an A2A agent
(:mod:`foreperson.protocols.a2a`).

This layer sits above teams, state machines and the page's HTTP edge (it serves the
first two on the third) and below the command line. The client side (MCP servers as an
agent's toolsets, remote A2A agents as workers) lives in :mod:`foreperson.agents` and
:mod:`foreperson.teams`.
"""

from ._progress import progress_message

__all__ = ["progress_message"]    # and import foreperson.protocols.mcp / .a2a (extras)
