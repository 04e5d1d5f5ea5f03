"""Embeddings through the RAG frameworks' own OpenAI embedders, unchanged, under
``replay-actor run`` (docs/embeddings.md, docs/front-door.md "Clients"): LlamaIndex's
``OpenAIEmbedding`` (base URL from ``OPENAI_API_BASE``) and Haystack's
``OpenAITextEmbedder`` + ``OpenAIDocumentEmbedder`` (the openai SDK's ``OPENAI_BASE_URL``).

Each tiny app embeds a query and two documents. It is recorded under ``run`` with a
record manifest whose live adapter points at the loopback fake vendor
(tests/support/endpoints_server.py), the child sealed all the same, then replayed twice under
``run`` with the default seal: float32-identical vectors, the fake vendor asked nothing
more. Telemetry is switched off by environment, so nothing but loopback is tried."""

from __future__ import annotations

import json
import struct
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support.endpoints_server import EndpointsServer, endpoints_server, vector
from tests.support.frontdoor_util import (
    quiet_env,
    record_manifest,
    replay_manifest,
    run_cli,
    summary,
)

__all__ = ["endpoints_server"]

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(240)]

QUERY = "where did the cat sit?"
DOCS = ["the cat sat", "on the mat"]
KEY_ENV = "REPLAY_ACTOR_TEST_EMBED_KEY"

#: LlamaIndex: no base URL in the code; OpenAIEmbedding reads OPENAI_API_BASE.
LLAMA_INDEX = """
    import json
    from llama_index.embeddings.openai import OpenAIEmbedding

    embed = OpenAIEmbedding(model="text-embedding-3-small")
    print(json.dumps({
        "query": embed.get_query_embedding("where did the cat sit?"),
        "docs": embed.get_text_embedding_batch(["the cat sat", "on the mat"]),
    }))
"""

#: Haystack: no base URL in the code; its embedders leave it to the openai SDK.
HAYSTACK = """
    import json
    from haystack import Document
    from haystack.components.embedders import OpenAIDocumentEmbedder, OpenAITextEmbedder

    query = OpenAITextEmbedder(model="text-embedding-3-small").run(text="where did the cat sit?")
    docs = OpenAIDocumentEmbedder(model="text-embedding-3-small").run(
        documents=[Document(content=t) for t in ["the cat sat", "on the mat"]]
    )
    print(json.dumps({
        "query": query["embedding"],
        "docs": [d.embedding for d in docs["documents"]],
    }))
"""


def _float32(vectors: list[list[float]]) -> list[bytes]:
    return [struct.pack(f"<{len(v)}f", *v) for v in vectors]


def _env() -> dict[str, str]:
    return quiet_env(
        HAYSTACK_TELEMETRY_ENABLED="False",
        **{KEY_ENV: "sk-fake-vendor-0123456789abcdef"},
    )


def _record_then_replay_twice(
    folder: Path, server: EndpointsServer, code: str
) -> tuple[dict[str, Any], ...]:
    app = [sys.executable, "-c", textwrap.dedent(code)]
    env = _env()
    record = record_manifest(folder, server.url + "/v1", model="m-live", api_key_env=KEY_ENV)
    # Recording is sealed too (the live adapter stays outside): a framework that ignored
    # the variables would fail here, not reach the real vendor.
    recorded = run_cli(record, app, env=env, flags=("--seal", "namespace"))
    assert recorded.returncode == 0, recorded.stderr
    assert summary(recorded.stderr).endswith("(2 recorded); sealed (namespace)")
    asked = len(server.received)
    assert [r.path for r in server.received] == ["/v1/embeddings"] * 2
    outputs = [json.loads(recorded.stdout)]
    for _ in range(2):
        replayed = run_cli(replay_manifest(folder, folder / "recorded.jsonl"), app, env=env)
        assert replayed.returncode == 0, replayed.stderr
        assert summary(replayed.stderr).startswith("replay-actor: 2 served, 0 missed,")
        assert summary(replayed.stderr).endswith("; sealed (namespace)")
        outputs.append(json.loads(replayed.stdout))
    assert len(server.received) == asked  # the replays asked the vendor nothing
    return tuple(outputs)


def _assert_exact(outputs: tuple[dict[str, Any], ...]) -> None:
    expected = {"query": _float32([vector(QUERY)]), "docs": _float32([vector(t) for t in DOCS])}
    for output in outputs:
        got = {"query": _float32([output["query"]]), "docs": _float32(output["docs"])}
        assert got == expected
    assert outputs[1] == outputs[2]


def test_llama_index_embeddings_record_then_replay_under_run(
    tmp_path: Path, endpoints_server: EndpointsServer
) -> None:
    pytest.importorskip("llama_index.embeddings.openai")
    outputs = _record_then_replay_twice(tmp_path, endpoints_server, LLAMA_INDEX)
    _assert_exact(outputs)
    bodies = [r.body for r in endpoints_server.received]
    assert [b["input"] for b in bodies] == [[QUERY], DOCS]


def test_haystack_embeddings_record_then_replay_under_run(
    tmp_path: Path, endpoints_server: EndpointsServer
) -> None:
    pytest.importorskip("haystack")
    outputs = _record_then_replay_twice(tmp_path, endpoints_server, HAYSTACK)
    _assert_exact(outputs)
    bodies = [r.body for r in endpoints_server.received]
    assert [b["input"] for b in bodies] == [[QUERY], DOCS]  # the live side sends lists
