"""The ecosystem's protocols, served: an ``Agent``, a ``Team`` or a ``Machine`` published
as a Model Context Protocol server (:mod:`foreperson.protocols.mcp`) or as an A2A agent
(:mod:`foreperson.protocols.a2a`).

This layer sits above teams and state machines (it serves them) and below the command
line. The client side (MCP servers as an agent's toolsets, remote A2A agents as workers)
lives in :mod:`foreperson.agents`.
"""

__all__: list[str] = []    # import foreperson.protocols.mcp / .a2a (optional extras)
