"""P15: embeddings through the front door.

The openai SDK's ``embeddings.create`` of 16 texts, 1,536 dimensions, its default
``encoding_format: "base64"``, posted to ``replay-actor serve`` (token check, the
embeddings mapping, one ``acomplete`` on the cursor actor, 16 vectors packed as float32
and base64-encoded) against the floor: the same SDK call to a bare server of the same
library (uvicorn, the bare ASGI app of ``benchmarks/frontdoor.py``) returning the same
bytes. Both servers are processes of their own; the client side is identical.
"""

from __future__ import annotations

import json
import random
import struct
import sys

import openai

from replay_actor import request_hash

from .frontdoor import _start, _stop
from .timing import Config, Row, Stats, interleave, paired_ratio, per_call
from .workload import cache_dir

__all__ = ["run_embeddings"]

MODEL = "text-embedding-3-small"
TEXTS = 16
DIMENSIONS = 1536


def _fixture() -> str:
    """A fixture with the one embedding entry (float32-exact vectors), its path."""
    rng = random.Random(15)
    texts = [
        f"passage {i}: " + " ".join(rng.choice("abcdefgh") * 3 for _ in range(40))
        for i in range(TEXTS)
    ]
    vectors = []
    for _ in texts:
        raw = [rng.uniform(-0.1, 0.1) for _ in range(DIMENSIONS)]
        vectors.append(list(struct.unpack(f"<{DIMENSIONS}f", struct.pack(f"<{DIMENSIONS}f", *raw))))
    request = {"kind": "embedding", "model": MODEL, "texts": texts}
    response = {"embeddings": vectors, "usage": {"prompt_tokens": 700, "total_tokens": 700}}
    path = cache_dir() / "embeddings.jsonl"
    line = {"schema_version": 1, "request_hash": request_hash(request), "response": response}
    path.write_text(json.dumps(line) + "\n")
    (cache_dir() / "embeddings-texts.json").write_text(json.dumps(texts))
    return str(path)


def run_embeddings(cfg: Config) -> list[Row]:
    manifest = cache_dir() / "embeddings.toml"
    manifest.write_text(f'[provider]\nkind = "replay"\nfixture = "{_fixture()}"\n')
    texts = json.loads((cache_dir() / "embeddings-texts.json").read_text())
    calls = cfg.pick(100, 20)
    reps = cfg.rounds(21, 5)
    door, ready = _start([sys.executable, "-m", "replay_actor", "serve", str(manifest)])
    info = json.loads(ready)
    bare = None
    try:
        ours_client = openai.OpenAI(base_url=info["openai_base_url"], api_key=info["token"])
        first = ours_client.embeddings.with_raw_response.create(model=MODEL, input=texts)
        canned = cache_dir() / "embeddings-answer.json"
        canned.write_bytes(first.http_response.content)
        bare, bare_url = _start([sys.executable, "-m", "benchmarks.frontdoor", "bare", str(canned)])
        floor_client = openai.OpenAI(base_url=bare_url.strip() + "/v1", api_key="x")
        a = ours_client.embeddings.create(model=MODEL, input=texts)
        b = floor_client.embeddings.create(model=MODEL, input=texts)
        if [e.embedding for e in a.data] != [e.embedding for e in b.data]:
            raise AssertionError("the two servers do not answer alike")

        def ours() -> None:
            ours_client.embeddings.create(model=MODEL, input=texts)

        def floor() -> None:
            floor_client.embeddings.create(model=MODEL, input=texts)

        samples = interleave(
            {"ours": per_call(ours, calls), "floor": per_call(floor, calls)}, reps=reps, warmup=2
        )
        ours_client.close()
        floor_client.close()
    finally:
        _stop(door)
        if bare is not None:
            _stop(bare)
    mine = Stats.of(samples["ours"])
    base = Stats.of(samples["floor"])
    paired = paired_ratio(samples["ours"], samples["floor"])
    return [
        Row(
            id="P15",
            what="openai SDK embeddings.create, 16 texts x 1,536 dims, base64, replay-actor serve",
            unit="us",
            ours=mine,
            reference=base,
            reference_name="the same SDK call to uvicorn + a bare ASGI app, same bytes",
            ratio=mine.median / base.median,
            ratio_means="ours / floor",
            op="<=",
            bound=1.3,
            extra={"paired_median_ratio": paired},
        )
    ]
