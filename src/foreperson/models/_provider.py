"""What every provider shares: one SDK client per event loop.

An async HTTP client's pooled connections belong to the event loop that opened them;
reused from another loop (``run_sync`` twice, or worker threads each with a loop) they
fail with "Event loop is closed". So a provider keeps one client per running loop, and
``aclose()`` closes the current loop's client (the next call opens a new one).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["Provider"]


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Provider:
    """Base of providers: owns the SDK clients (one per event loop), base URL and key.

    Args:
        factory: builds a new SDK client (called at most once per event loop).
        client: a client to use as is, in every loop (the caller keeps it on one loop).
    """

    name = "provider"

    def __init__(self, factory: Callable[[], Any] | None, client: Any = None) -> None:
        if factory is None and client is None:
            raise ValueError("a provider needs a client factory or a client")
        self._factory = factory
        self._fixed = client
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )
        self._outside: Any = None  # the client used outside any event loop
        self._lock = threading.Lock()

    @property
    def client(self) -> Any:
        """The SDK client for the running event loop (created on first use)."""
        if self._fixed is not None:
            return self._fixed
        assert self._factory is not None
        loop = _running_loop()
        with self._lock:
            if loop is None:
                if self._outside is None:
                    self._outside = self._factory()
                return self._outside
            client = self._by_loop.get(loop)
            if client is None:
                client = self._by_loop[loop] = self._factory()
            return client

    async def aclose(self) -> None:
        """Close the running loop's client (and one made outside any loop); the next
        request opens a new one. A client given to the constructor is closed for good."""
        if self._fixed is not None:
            await self._fixed.close()
            return
        loop = _running_loop()
        with self._lock:
            clients = [self._by_loop.pop(loop, None) if loop is not None else None,
                       self._outside]
            self._outside = None
        for client in clients:
            if client is not None:
                await client.close()
