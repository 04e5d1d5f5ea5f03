"""Regenerate ``fixture.jsonl`` from the application itself.

    .venv/bin/python examples/openai_app/make_fixture.py

The app runs once against a provider that writes down each neutral request the SDK
transport hands it and answers from ``ANSWERS`` in order; each fixture line's hash is
``request_hash`` of that request. So the fixture can never drift from the app:
``tests/examples/test_openai_app.py`` checks that this output matches the file on disk.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import httpx2
import openai

HERE: Final = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from app import plan_weekend  # noqa: E402

from replay_actor import entry_line, request_hash  # noqa: E402
from replay_actor._interface import complete_each  # noqa: E402
from replay_actor.integrations.transport import ProviderTransport  # noqa: E402

FIXTURE: Final = HERE / "fixture.jsonl"
ANSWERS: Final = [
    "Porto: port cellars, river views and a walkable old town.",
    "Try a francesinha, Porto's famous layered sandwich.",
    "Greetings from Porto, full of bridges, tiles and port wine!",
]


class Scripted:
    """A provider answering ``ANSWERS`` in order and keeping each request it was asked."""

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.closed = False

    def complete(self, request: Any) -> dict[str, Any]:
        self.requests.append(request)
        return {"content": ANSWERS[len(self.requests) - 1], "finish_reason": "stop"}

    def complete_many(self, requests: Any) -> list[Any]:
        return complete_each(self.complete, requests)

    async def acomplete(self, request: Any) -> dict[str, Any]:
        return self.complete(request)

    def snapshot(self) -> dict[str, Any]:
        return {"kind": "scripted"}

    def release(self) -> None:
        self.closed = True

    def __enter__(self) -> Scripted:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def build() -> bytes:
    provider = Scripted()
    http = httpx2.Client(transport=ProviderTransport(provider, "openai"))
    client = openai.OpenAI(api_key="unused", http_client=http)
    with client, contextlib.redirect_stdout(io.StringIO()):
        plan_weekend(client)
    lines = [
        entry_line(request_hash(request), response={"content": answer, "finish_reason": "stop"})
        for request, answer in zip(provider.requests, ANSWERS, strict=True)
    ]
    return b"\n".join(lines) + b"\n"


if __name__ == "__main__":
    FIXTURE.write_bytes(build())
    print(f"wrote {FIXTURE}")
