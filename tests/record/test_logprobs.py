"""Logprobs are part of the answer: a request that asks for them (OpenAI chat's
``logprobs``/``top_logprobs``, the Responses API's ``top_logprobs``) is recorded with
them and replayed with them, streamed or not; a shape that cannot say them refuses the
request. DeepEval's G-Eval, whose score is weighted by the score token's log
probabilities, is recorded through ``replay-actor run`` and replayed twice.

The vendor is a loopback server (``LogprobsServer``) answering chat completions and
Responses with token log probabilities when asked.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai.types.chat import ChatCompletionMessageParam

from replay_actor import RequestError, load_fixture, open_provider, openai_client
from replay_actor.vendors import make_vendor
from tests.support.chat_server import JSONHandler, LoopbackServer

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(300)]


def _token(text: str, logprob: float, top: list[tuple[str, float]] | None = None) -> dict[str, Any]:
    return {
        "token": text,
        "logprob": logprob,
        "bytes": list(text.encode()),
        "top_logprobs": [
            {"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top or []
        ],
    }


#: The score token's alternatives: 8 (p 0.8), 7 (0.15), 9 (0.05): G-Eval's weighted
#: score is then 7.9, never the integer it parsed.
SCORE_TOP = [("8", math.log(0.8)), ("7", math.log(0.15)), ("9", math.log(0.05))]
SCORE_TEXT = '{"score": 8, "reason": "The answer is correct."}'
SCORE_TOKENS = [
    _token('{"', -0.01),
    _token("score", -0.01),
    _token('":', -0.01),
    _token(" ", -0.01),
    _token("8", math.log(0.8), SCORE_TOP),
    _token(', "reason": "The answer is correct."}', -0.3),
]
STEPS_TEXT = json.dumps(
    {"steps": ["Read the input.", "Check that the actual output answers it correctly."]}
)


class _Handler(JSONHandler):
    def do_POST(self) -> None:
        got, n = self._receive()
        body = got.body
        if self.path.endswith("/responses"):
            self._send(200, json.dumps(_responses_answer(body, n)).encode())
            return
        asked = body.get("logprobs") is True
        text = SCORE_TEXT if asked else STEPS_TEXT
        prompt = json.dumps(body["messages"])
        if "score" not in prompt and asked:
            text = f"{n}: tokens"
        tokens = SCORE_TOKENS if text == SCORE_TEXT else [_token(text, -0.5, [(text, -0.5)])]
        answer = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 1,
            "model": body.get("model", "m"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "finish_reason": "stop",
                    "logprobs": {"content": tokens, "refusal": None} if asked else None,
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        self._send(200, json.dumps(answer).encode())


def _responses_answer(body: dict[str, Any], n: int) -> dict[str, Any]:
    wanted = "message.output_text.logprobs" in (body.get("include") or [])
    text = f"{n}: answer"
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": body.get("model", "m"),
        "output": [
            {
                "id": f"msg_{n}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {
                        "type": "output_text",
                        "text": text,
                        "annotations": [],
                        "logprobs": [_token(text, -0.25, [(text, -0.25), ("x", -2.0)])]
                        if wanted
                        else [],
                    }
                ],
            }
        ],
        "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
    }


class LogprobsServer(LoopbackServer):
    handler = _Handler
    name = "logprobs-server"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@pytest.fixture
def vendor() -> Iterator[LogprobsServer]:
    server = LogprobsServer()
    try:
        yield server
    finally:
        server.close()


def _record(vendor: LogprobsServer, fixture: Path, adapter: str = "openai") -> dict[str, Any]:
    live = {"adapter": adapter, "model": "gpt-4.1", "base_url": vendor.base_url}
    return {"provider": {"kind": "record", "fixture": str(fixture), "live": live}}


def _replay(fixture: Path) -> dict[str, Any]:
    return {"provider": {"kind": "replay", "fixture": str(fixture)}}


MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say something."}]


def _chat(client: Any, **asked: Any) -> dict[str, Any]:
    answer: dict[str, Any] = client.chat.completions.create(
        model="gpt-4.1", messages=MESSAGES, **asked
    ).model_dump()
    return answer


def test_chat_logprobs_are_recorded_and_replayed(vendor: LogprobsServer, tmp_path: Path) -> None:
    fixture = tmp_path / "chat.jsonl"
    asked = {"logprobs": True, "top_logprobs": 1}
    with openai_client(_record(vendor, fixture)) as client:
        live = _chat(client, **asked)
        plain = _chat(client)
    assert live["choices"][0]["logprobs"] is not None
    assert plain["choices"][0]["logprobs"] is None  # not asked for: another request
    assert vendor.received[0].body["top_logprobs"] == 1  # sent as asked
    assert load_fixture(fixture).responses == 2
    with openai_client(_replay(fixture)) as client:
        again = _chat(client, **asked)
        with client.chat.completions.stream(
            model="gpt-4.1", messages=MESSAGES, logprobs=True, top_logprobs=1
        ) as stream:
            streamed = stream.get_final_completion().model_dump()
        plain_again = _chat(client)
    expected = live["choices"][0]["logprobs"]
    assert expected["content"][0]["top_logprobs"]
    assert again["choices"][0]["logprobs"] == expected
    assert streamed["choices"][0]["logprobs"] == expected
    assert streamed["choices"][0]["message"]["content"] == live["choices"][0]["message"]["content"]
    assert plain_again["choices"][0]["logprobs"] is None
    assert len(vendor.received) == 2


def _tokens(response: Any) -> list[dict[str, Any]]:
    tokens: list[dict[str, Any]] = response.model_dump()["output"][0]["content"][0]["logprobs"]
    return tokens


def test_responses_logprobs_are_recorded_and_replayed(
    vendor: LogprobsServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "responses.jsonl"
    asked: dict[str, Any] = {"top_logprobs": 2, "include": ["message.output_text.logprobs"]}
    with openai_client(_record(vendor, fixture, "openai-responses")) as client:
        live = _tokens(client.responses.create(model="gpt-4.1", input="Say something.", **asked))
    # The adapter asks the API to include them: a recording keeps what was asked.
    assert vendor.received[0].body["include"] == ["message.output_text.logprobs"]
    assert vendor.received[0].body["top_logprobs"] == 2
    assert live and live[0]["top_logprobs"][1]["token"] == "x"
    with openai_client(_replay(fixture)) as client:
        again = _tokens(client.responses.create(model="gpt-4.1", input="Say something.", **asked))
        with client.responses.stream(model="gpt-4.1", input="Say something.", **asked) as stream:
            streamed = _tokens(stream.get_final_response())
    assert again == live
    assert streamed == live
    assert len(vendor.received) == 1


def test_a_shape_that_cannot_say_them_refuses_the_request(tmp_path: Path) -> None:
    anthropic_body = {"model": "c", "max_tokens": 5, "messages": MESSAGES, "logprobs": True}
    with pytest.raises(RequestError, match="logprobs cannot be replayed or recorded"):
        make_vendor("anthropic").read_body(anthropic_body)
    completion = {"model": "m", "prompt": "hi", "logprobs": 2}
    with pytest.raises(RequestError, match="logprobs"):
        make_vendor("openai-completions").read_body(completion)
    # A live adapter that cannot return them refuses before anything is sent.
    live = {"kind": "live", "adapter": "anthropic", "model": "c", "base_url": "http://127.0.0.1:9"}
    with open_provider({"provider": live}) as provider, pytest.raises(RequestError, match="logp"):
        provider.complete({"messages": MESSAGES, "params": {"logprobs": True}})


def test_inspect_sees_the_replayed_logprobs() -> None:
    from replay_actor.integrations.inspect_ai import to_output

    output = to_output(
        {"content": "8", "logprobs": {"content": SCORE_TOKENS}}, "replay/any", tools=[]
    )
    logprobs = output.choices[0].logprobs
    assert logprobs is not None
    assert [t.token for t in logprobs.content] == [t["token"] for t in SCORE_TOKENS]
    assert logprobs.content[4].top_logprobs is not None
    assert logprobs.content[4].top_logprobs[1].token == "7"


# -- DeepEval's G-Eval -----------------------------------------------------------------------

G_EVAL = textwrap.dedent(
    """
    import json
    from deepeval.metrics import GEval
    from deepeval.models import GPTModel
    from deepeval.test_case import LLMTestCase, LLMTestCaseParams

    metric = GEval(
        name="Correctness",
        criteria="Is the actual output a correct answer to the input?",
        evaluation_params=[LLMTestCaseParams.INPUT, LLMTestCaseParams.ACTUAL_OUTPUT],
        model=GPTModel(model="gpt-4.1"),
        async_mode=False,
    )
    metric.measure(LLMTestCase(input="What is 2 + 2?", actual_output="4"))
    print(json.dumps({"score": metric.score, "reason": metric.reason}))
    """
)


def _run(manifest: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEEPEVAL_TELEMETRY_OPT_OUT": "YES", "DEEPEVAL_RESULTS_FOLDER": ""}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "replay_actor",
            "run",
            str(manifest),
            "--",
            sys.executable,
            "-c",
            G_EVAL,
        ],
        cwd=folder,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.slow  # most of a minute or more: make test-tools runs it
def test_deepeval_g_eval_is_recorded_then_replayed_twice(
    vendor: LogprobsServer, tmp_path: Path
) -> None:
    pytest.importorskip("deepeval")
    record = tmp_path / "record.toml"
    record.write_text(
        '[provider]\nkind = "record"\nfixture = "geval.jsonl"\n[provider.live]\n'
        f'adapter = "openai"\nmodel = "gpt-4.1"\nbase_url = "{vendor.base_url}"\n'
    )
    replay = tmp_path / "replay.toml"
    replay.write_text('[provider]\nkind = "replay"\nfixture = "geval.jsonl"\n')
    recorded = _run(record, tmp_path)
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    result = json.loads(recorded.stdout.strip().splitlines()[-1])
    # The weighted score (7.9 of 10) exists only if the score token's logprobs came back.
    assert result["score"] == pytest.approx(0.79)
    asked = [r.body for r in vendor.received]
    assert any(body.get("logprobs") is True for body in asked)
    fixture = load_fixture(tmp_path / "geval.jsonl")
    stored = [r for h in fixture.request_hashes() for r in fixture.responses_for(h) or []]
    assert any("logprobs" in response for response in stored)
    for _ in range(2):
        replayed = _run(replay, tmp_path)
        assert replayed.returncode == 0, replayed.stderr[-3000:]
        assert json.loads(replayed.stdout.strip().splitlines()[-1]) == result
        assert "0 missed, 0 exhausted, 0 blocked" in replayed.stderr
    assert len(vendor.received) == len(asked)  # the replays asked the vendor nothing
