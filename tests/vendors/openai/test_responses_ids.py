"""Responses ids are never reused within a provider's life (docs/responses.md, "Ids").

The bug this pins: with more transcripts served than the memory holds (2,048), a new
conversation ending in the same answer as a forgotten one got the forgotten one's id,
and a client continuing the old conversation with ``previous_response_id`` silently got
the new one's. Now every conversation gets its own id, and a forgotten id is a 400 saying
it aged out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from replay_actor import RequestError, openai_client, request_hash
from replay_actor._response import read_response
from replay_actor.fixture import entry_line
from replay_actor.vendors import make_vendor
from replay_actor.vendors.openai.responses import TRANSCRIPTS
from replay_actor.vendors.openai.responses import remembering as OpenAIResponses

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(300)]

SAMPLES = 2_100


def _hash(body: dict[str, Any]) -> str:
    return request_hash(make_vendor("openai-responses").read_body(body).request)


def test_2100_transcripts_each_get_their_own_id_and_an_aged_out_one_is_a_400(
    tmp_path: Path,
) -> None:
    assert SAMPLES > TRANSCRIPTS
    lines = [
        # Every sample ends in the same answer at the same position: the case that
        # reused ids.
        entry_line(_hash({"model": "m", "input": f"sample {i}"}), response={"content": "same"})
        for i in range(SAMPLES)
    ]
    last = SAMPLES - 1
    follow_up = {
        "model": "m",
        "input": [
            {"role": "user", "content": f"sample {last}"},
            {"role": "assistant", "content": "same"},
            {"role": "user", "content": "and then?"},
        ],
    }
    lines.append(entry_line(_hash(follow_up), response={"content": f"then {last}"}))
    fixture = tmp_path / "fixture.jsonl"
    fixture.write_bytes(b"".join(line + b"\n" for line in lines))
    manifest = {"provider": {"kind": "replay", "fixture": str(fixture)}}
    with openai_client(manifest) as client:
        ids = [client.responses.create(model="m", input=f"sample {i}").id for i in range(SAMPLES)]
        assert len(set(ids)) == SAMPLES
        # Sample 0's transcript was forgotten: a 400 saying so, never sample 2049's.
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="m", previous_response_id=ids[0], input="and then?")
        assert "aged out" in caught.value.message and ids[0] in caught.value.message
        # A remembered one continues its own conversation.
        answer = client.responses.create(
            model="m", previous_response_id=ids[last], input="and then?"
        )
        assert answer.output_text == f"then {last}"
        assert answer.id not in ids


def test_an_id_forgotten_and_its_conversation_served_again_gets_a_new_id() -> None:
    vendor = OpenAIResponses(capacity=1)
    same = read_response({"content": "same"})
    first = vendor.response_body(same, vendor.read_body({"model": "m", "input": "a"}))["id"]
    again = vendor.response_body(same, vendor.read_body({"model": "m", "input": "a"}))["id"]
    assert again == first  # remembered: the same conversation keeps its id
    other = vendor.response_body(same, vendor.read_body({"model": "m", "input": "b"}))["id"]
    third = vendor.response_body(same, vendor.read_body({"model": "m", "input": "a"}))["id"]
    assert len({first, other, third}) == 3
    with pytest.raises(RequestError, match="aged out"):
        vendor.read_body({"model": "m", "input": "x", "previous_response_id": first})
    with pytest.raises(RequestError, match="was not served"):
        vendor.read_body({"model": "m", "input": "x", "previous_response_id": "resp_never"})
