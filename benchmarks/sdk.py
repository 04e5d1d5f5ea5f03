"""P12: the SDK path. An unchanged ``openai`` client's ``chat.completions.create`` of the
realistic request, answered in replay through ``openai_client`` (vendor body -> neutral
request -> ``complete()`` -> vendor response), against the floor: the same SDK call over
``httpx2.MockTransport`` returning the same canned JSON, plus one ``complete()`` of the
same request on a handle of its own. The difference is what the mapping and the
transport cost on top of the SDK and the actor round trip.

P12r is the same for the Responses API shape (``responses.create``, docs/responses.md),
with the realistic request less its ``stop`` and ``seed`` (which the Responses API
cannot say); its
fixture is the P12 one with that request's entry last.

P12g is the same measurement for ``google-genai``'s ``models.generate_content`` through
``gemini_client``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import msgspec
import openai

from replay_actor import acquire, entry_line, gemini_client, openai_client, request_hash
from replay_actor._response import read_response
from replay_actor.vendors.gemini import generate as vendor_gemini
from replay_actor.vendors.openai import chat as vendor_openai
from replay_actor.vendors.openai import responses as vendor_responses

from .timing import Config, Row, Stats, interleave, paired_ratio, per_call
from .workload import cache_dir, fixture, realistic_request, response_for

__all__ = ["run_sdk", "run_sdk_gemini", "run_sdk_responses"]

MODEL = "gpt-4.1-mini"
GEMINI_MODEL = "gemini-2.5-flash"


def _measure(
    cfg: Config,
    *,
    row_id: str,
    what: str,
    path: Path,
    req: dict[str, Any],
    canned_for: Callable[[dict[str, Any]], bytes],
    call: Callable[[openai.OpenAI], Any],
) -> list[Row]:
    calls = cfg.pick(200, 50)
    reps = cfg.rounds(21, 5)
    ours = openai_client({"provider": {"kind": "replay", "fixture": str(path)}})
    handle = acquire(path, timeout=120.0)
    canned = canned_for(handle.complete(req))

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "application/json"}, content=canned)

    mock = openai.OpenAI(
        api_key="x", http_client=httpx2.Client(transport=httpx2.MockTransport(answer))
    )

    def floor() -> None:
        call(mock)
        handle.complete(req)

    try:
        a = call(ours)
        b = call(mock)
        if a.model_dump() != b.model_dump():
            raise AssertionError("the two sides do not answer alike")
        samples = interleave(
            {"ours": per_call(lambda: call(ours), calls), "floor": per_call(floor, calls)},
            reps=reps,
            warmup=2,
        )
    finally:
        ours.close()
        mock.close()
        handle.release()
    mine = Stats.of(samples["ours"])
    base = Stats.of(samples["floor"])
    paired = paired_ratio(samples["ours"], samples["floor"])
    return [
        Row(
            id=row_id,
            what=what,
            unit="us",
            ours=mine,
            reference=base,
            reference_name="same SDK call over MockTransport + one complete()",
            ratio=mine.median / base.median,
            ratio_means="ours / floor",
            op="<=",
            bound=1.2,
            extra={"paired_median_ratio": paired},
        )
    ]


def run_sdk(cfg: Config) -> list[Row]:
    req = realistic_request()
    body = vendor_openai.to_body(req, MODEL)
    if request_hash(vendor_openai.read_body(body).request) != request_hash(req):
        raise AssertionError("the SDK body does not hash as the realistic request")
    kwargs: dict[str, Any] = dict(body)
    return _measure(
        cfg,
        row_id="P12",
        what="openai_client chat.completions.create, realistic request, replay",
        path=fixture(100),
        req=req,
        canned_for=lambda response: msgspec.json.encode(
            vendor_openai.response_body(read_response(response), MODEL)
        ),
        call=lambda client: client.chat.completions.create(**kwargs),
    )


def _responses_fixture(req: dict[str, Any], entries: int = 100) -> Path:
    path = cache_dir() / f"fixture-responses-{request_hash(req)[7:19]}-{entries}.jsonl"
    if not path.exists():
        lines = [
            entry_line(
                "sha256:" + hashlib.sha256(b"entry %d" % i).hexdigest(), response=response_for(i)
            )
            for i in range(entries - 1)
        ]
        lines.append(entry_line(request_hash(req), response=response_for(-1)))
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(b"\n".join(lines) + b"\n")
        tmp.replace(path)
    return path


def run_sdk_responses(cfg: Config) -> list[Row]:
    req = realistic_request()
    # The Responses API has no stop and no seed.
    del req["params"]["stop"], req["params"]["seed"]
    body = vendor_responses.to_body(req, MODEL)
    vendor = vendor_responses.remembering()
    read = vendor.read_body(body)
    if request_hash(read.request) != request_hash(req):
        raise AssertionError("the Responses body does not hash as the realistic request")
    kwargs: dict[str, Any] = dict(body)
    return _measure(
        cfg,
        row_id="P12r",
        what="openai_client responses.create, realistic request, replay",
        path=_responses_fixture(req),
        req=req,
        canned_for=lambda response: msgspec.json.encode(
            vendor.response_body(read_response(response), read)
        ),
        call=lambda client: client.responses.create(**kwargs),
    )


def run_sdk_gemini(cfg: Config) -> list[Row]:
    """P12g: P12 for Gemini's shape (google-genai's sync client on httpx2)."""
    from google import genai
    from google.genai import types

    req = realistic_request()
    body = vendor_gemini.to_body(req, GEMINI_MODEL)
    if request_hash(vendor_gemini.read_body(body).request) != request_hash(req):
        raise AssertionError("the Gemini body does not hash as the realistic request")
    path = fixture(100)
    # google-genai's own work on this request is ~10x openai's (pydantic models both
    # ways), so fewer calls per sample give samples as long as P12's.
    calls = cfg.pick(40, 10)
    reps = cfg.rounds(21, 5)
    ours = gemini_client({"provider": {"kind": "replay", "fixture": str(path)}})
    handle = acquire(path, timeout=120.0)
    canned = msgspec.json.encode(
        vendor_gemini.response_body(read_response(handle.complete(req)), GEMINI_MODEL)
    )

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "application/json"}, content=canned)

    mock = genai.Client(
        api_key="x",
        http_options=types.HttpOptions(client_args={"transport": httpx2.MockTransport(answer)}),
    )
    # The app's call, as google-genai users write it: contents plus a config object.
    config = types.GenerateContentConfig.model_validate(
        {
            **body["generationConfig"],
            "systemInstruction": body["systemInstruction"],
            "tools": body["tools"],
            "toolConfig": body["toolConfig"],
        }
    )
    contents = [types.Content.model_validate(c) for c in body["contents"]]

    def call(client: genai.Client) -> Any:
        return client.models.generate_content(model=GEMINI_MODEL, contents=contents, config=config)

    def floor() -> None:
        call(mock)
        handle.complete(req)

    try:
        a = call(ours).model_dump(exclude={"sdk_http_response"})
        b = call(mock).model_dump(exclude={"sdk_http_response"})
        if a != b:
            raise AssertionError("the two sides do not answer alike")
        samples = interleave(
            {"ours": per_call(lambda: call(ours), calls), "floor": per_call(floor, calls)},
            reps=reps,
            warmup=2,
        )
    finally:
        ours.close()
        mock.close()
        handle.release()
    mine = Stats.of(samples["ours"])
    base = Stats.of(samples["floor"])
    paired = paired_ratio(samples["ours"], samples["floor"])
    return [
        Row(
            id="P12g",
            what="gemini_client models.generate_content, realistic request, replay",
            unit="us",
            ours=mine,
            reference=base,
            reference_name="same SDK call over MockTransport + one complete()",
            ratio=mine.median / base.median,
            ratio_means="ours / floor",
            op="<=",
            bound=1.2,
            extra={"paired_median_ratio": paired},
        )
    ]
