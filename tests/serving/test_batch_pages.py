"""Listing batches and files over more than one page (docs/batches.md, "Listing"):
``limit`` and the cursors (OpenAI's ``after``; Anthropic's ``after_id`` and
``before_id``), walked by the real SDKs' auto-paginating iterators, in-process (sync and
async transports) and through the front door."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from replay_actor import anthropic_client, async_openai_client, openai_client, request_hash
from replay_actor.fixture import entry_line
from replay_actor.serving.batches._page import Paging, page
from tests.support.frontdoor_util import replay_manifest, serving

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(180)]

HI = [{"role": "user", "content": "hi"}]
LINE = {
    "custom_id": "a",
    "method": "POST",
    "url": "/v1/chat/completions",
    "body": {"model": "gpt-test", "messages": HI},
}
PARAMS: Any = {"model": "m", "max_tokens": 20, "messages": HI}
BATCHES = 5


def _fixture(tmp_path: Path) -> Path:
    path = tmp_path / "fixture.jsonl"
    entries = [
        (request_hash({"messages": HI}), {"content": "hello"}),
        (request_hash({"messages": HI, "params": {"max_tokens": 20}}), {"content": "hello"}),
    ]
    path.write_bytes(b"".join(entry_line(h, response=r) + b"\n" for h, r in entries))
    return path


def _manifest(tmp_path: Path) -> dict[str, Any]:
    return {"provider": {"kind": "replay", "fixture": str(_fixture(tmp_path))}}


def _openai_batches(client: openai.OpenAI) -> list[str]:
    """``BATCHES`` batches of one served line each: their ids, oldest first."""
    made = []
    for _ in range(BATCHES):
        upload = client.files.create(file=("in.jsonl", json.dumps(LINE).encode()), purpose="batch")
        batch = client.batches.create(
            input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert batch.request_counts is not None and batch.request_counts.completed == 1
        made.append(batch.id)
    return made


def _check_openai_pages(client: openai.OpenAI, made: list[str]) -> None:
    newest_first = made[::-1]
    first = client.batches.list(limit=2)
    assert [b.id for b in first.data] == newest_first[:2] and first.has_more
    # The SDK's iterator follows `after` (the page's last id) until has_more is false.
    assert [b.id for b in client.batches.list(limit=2)] == newest_first
    assert len(list(client.batches.list(limit=2).iter_pages())) == 3
    assert [b.id for b in client.batches.list()] == newest_first  # default 20: one page
    last = client.batches.list(limit=2, after=newest_first[3])
    assert [b.id for b in last.data] == newest_first[4:] and not last.has_more
    # Files: each batch's upload and its output file, newest first by default.
    files = list(client.files.list(limit=3))
    assert len(files) == 2 * BATCHES and len({f.id for f in files}) == 2 * BATCHES
    newest = [f.id for f in files]
    assert [f.id for f in client.files.list(limit=4, order="asc")] == newest[::-1]
    uploads = list(client.files.list(limit=2, purpose="batch"))
    assert len(uploads) == BATCHES and {f.purpose for f in uploads} == {"batch"}
    with pytest.raises(openai.BadRequestError, match="limit must be"):
        client.batches.list(limit=0)
    with pytest.raises(openai.BadRequestError, match="after must be"):
        client.batches.list(after="not-an-id")


def test_openai_batches_and_files_list_over_pages_in_process(tmp_path: Path) -> None:
    with openai_client(_manifest(tmp_path)) as client:
        _check_openai_pages(client, _openai_batches(client))


def test_the_async_client_pages_on_the_async_transport(tmp_path: Path) -> None:
    async def main() -> tuple[list[str], list[str]]:
        async with async_openai_client(_manifest(tmp_path)) as client:
            made = []
            for _ in range(3):
                upload = await client.files.create(
                    file=("in.jsonl", json.dumps(LINE).encode()), purpose="batch"
                )
                batch = await client.batches.create(
                    input_file_id=upload.id,
                    endpoint="/v1/chat/completions",
                    completion_window="24h",
                )
                made.append(batch.id)
            first = await client.batches.list(limit=1)
            assert len(first.data) == 1 and first.has_more
            listed = [b.id async for b in client.batches.list(limit=1)]
            pages = [p async for p in (await client.batches.list(limit=1)).iter_pages()]
            assert len(pages) == 3
            return made, listed

    made, listed = asyncio.run(main())
    assert listed == made[::-1]


def _anthropic_batches(client: anthropic.Anthropic) -> list[str]:
    made = []
    for n in range(BATCHES):
        batch = client.messages.batches.create(requests=[{"custom_id": f"r{n}", "params": PARAMS}])
        assert batch.request_counts.succeeded == 1
        made.append(batch.id)
    return made


def _check_anthropic_pages(client: anthropic.Anthropic, made: list[str]) -> None:
    newest_first = made[::-1]
    first = client.messages.batches.list(limit=2)
    assert [b.id for b in first.data] == newest_first[:2] and first.has_more
    assert (first.first_id, first.last_id) == (newest_first[0], newest_first[1])
    # Forwards: after_id = the page's last_id, until has_more is false.
    assert [b.id for b in client.messages.batches.list(limit=2)] == newest_first
    # Backwards from the oldest: before_id = the page's first_id, the nearest page first.
    back = client.messages.batches.list(limit=2, before_id=made[0])
    assert [b.id for b in back.data] == [made[2], made[1]] and back.has_more
    assert [b.id for b in client.messages.batches.list(limit=2, before_id=made[0])] == [
        made[2],
        made[1],
        made[4],
        made[3],
    ]
    with pytest.raises(anthropic.BadRequestError, match="not both"):
        client.messages.batches.list(after_id=made[0], before_id=made[1])
    with pytest.raises(anthropic.BadRequestError, match="before_id must be"):
        client.messages.batches.list(before_id="nowhere")
    for bad in ("x", "%C2%B2", "9" * 5000, "-1"):
        with pytest.raises(anthropic.BadRequestError, match="limit must be"):
            client.get(f"/v1/messages/batches?limit={bad}", cast_to=object)


def test_anthropic_message_batches_list_over_pages_in_process(tmp_path: Path) -> None:
    with anthropic_client(_manifest(tmp_path)) as client:
        made = _anthropic_batches(client)
        _check_anthropic_pages(client, made)
        # A deleted cursor still pages on from where it was.
        client.messages.batches.delete(made[2])
        after = client.messages.batches.list(after_id=made[2])
        assert [b.id for b in after.data] == [made[1], made[0]]


def test_both_vendors_lists_page_through_the_front_door(tmp_path: Path) -> None:
    manifest = replay_manifest(tmp_path, _fixture(tmp_path))
    with serving(manifest) as (_proc, info):
        oai = openai.OpenAI(base_url=info["openai_base_url"], api_key=info["token"])
        _check_openai_pages(oai, _openai_batches(oai))
        oai.close()
        ant = anthropic.Anthropic(base_url=info["anthropic_base_url"], api_key=info["token"])
        _check_anthropic_pages(ant, _anthropic_batches(ant))
        ant.close()


def test_a_page_is_cut_by_serial_whatever_the_store_keeps() -> None:
    items = [{"id": f"batch_{n:024x}"} for n in (9, 7, 4, 2)]  # newest first
    assert page(items, Paging(2)) == (items[:2], True)
    assert page(items, Paging(2, after=f"batch_{8:024x}")) == (items[1:3], True)
    assert page(items, Paging(5, after=f"batch_{4:024x}")) == (items[3:], False)
    assert page(items, Paging(1, before=f"batch_{4:024x}")) == (items[1:2], True)
    ascending = page(items, Paging(3, ascending=True))
    assert ascending == (items[::-1][:3], True)
    assert (
        page(items, Paging(2, after="batch_x"))
        == "after must be the id of an object this server listed"
    )
