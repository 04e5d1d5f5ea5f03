"""Batches: OpenAI Files + Batches and Anthropic Message Batches, emulated over the
serving provider (docs/batches.md).

Runs in: the serving process (a transport's caller or the front door), inside
``serving.Exchange`` (routing) and ``serving.Serving`` / ``AsyncServing`` (asking the
provider). A batch is no new kind of call: each of its lines is read by the vendor shape
of its endpoint exactly as if it had been posted alone (``Exchange.prepare``) and put to
the provider once, in line order; the batch then completes at once, its per-line
failures (a miss, an exhausted sequence, an invalid line) in the vendor's own error
output. In record mode the lines are therefore recorded one call at a time through the
live adapter; no vendor batch API is ever called.

::

    __init__.py  Batches: routes a batch path to its vendor's handler
    _work.py     BatchWork (the lines to ask, then the answer), Router (the exchange)
    openai.py    /v1/files (upload, retrieve, content, list, delete), /v1/batches
    anthropic.py /v1/messages/batches (create, retrieve, list, cancel, delete, results)
    store.py     the bounded in-memory store of files and batches
    _page.py     one page of a list endpoint (limit, after / after_id / before_id)
    _http.py     JSON answers, headers, the multipart upload
"""

from __future__ import annotations

from .._answer import Answer, Headers
from ._work import BatchWork, Router
from .anthropic import AnthropicBatches
from .openai import OpenAIBatches
from .store import Store

__all__ = ["BatchWork", "Batches"]


class Batches:
    """The batch endpoints of the vendor families ``exchange`` serves, over one store."""

    def __init__(self, exchange: Router, families: tuple[str, ...]) -> None:
        self.store = Store()
        self._handlers: list[OpenAIBatches | AnthropicBatches] = []
        if "openai" in families:
            self._handlers.append(OpenAIBatches(exchange, self.store))
        if "anthropic" in families:
            self._handlers.append(AnthropicBatches(exchange, self.store))

    @property
    def paths(self) -> list[str]:
        """The batch paths served, as a 404 lists them."""
        return [path for handler in self._handlers for path in handler.paths]

    def handle(
        self, method: str, path: str, body: bytes, headers: Headers | None, query: str = ""
    ) -> Answer | BatchWork | None:
        """The answer (or the batch to run) for a batch path, ``None`` for any other
        (``path`` canonical: ``serving._routes.canonical_path``; ``query`` the URL's
        query, which the list endpoints page by)."""
        for handler in self._handlers:
            handled = handler.handle(method, path, body, headers, query)
            if handled is not None:
                return handled
        return None
