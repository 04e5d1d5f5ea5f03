"""The Inspect AI provider ``replay``, driven by real Inspect evals.

Evals run in-process through ``inspect_ai.eval`` with a ``Model`` whose provider the test
releases itself (Inspect memoises models and never closes them in-process), and through
the ``inspect`` command in a subprocess, exactly as the docs show it. Logs go to the
test's temporary folder.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.log import EvalLog, read_eval_log
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    ContentImage,
    ContentText,
    GenerateConfig,
    Model,
    ResponseSchema,
    get_model,
)
from inspect_ai.scorer import includes
from inspect_ai.solver import generate
from inspect_ai.tool import ToolCall, ToolCallError, ToolFunction, ToolInfo, ToolParams
from inspect_ai.util import JSONSchema

from replay_actor import ManifestError, ReplayProvider, load_fixture, request_hash
from replay_actor._response import Unexpressible
from replay_actor.fixture import entry_line
from replay_actor.integrations.inspect_ai import ReplayModelAPI, to_output, to_request
from tests.support.chat_server import ChatServer
from tests.support.paths import ROOT

MISS = "no replay fixture matches this request"
QUESTIONS = [f"Question {i}: name a colour." for i in range(4)]
EPOCHS = 3


@pytest.fixture(autouse=True)
def _inspect_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing Inspect writes lands in the repository."""
    monkeypatch.setenv("INSPECT_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("INSPECT_DISPLAY", "none")
    monkeypatch.setenv("INSPECT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


def colours_task(questions: list[str] = QUESTIONS, epochs: int = EPOCHS) -> Task:
    return Task(
        dataset=[Sample(id=i, input=q, target="x") for i, q in enumerate(questions)],
        solver=generate(),
        scorer=includes(),
        epochs=epochs,
        config=GenerateConfig(temperature=1.0),
    )


def user_request(question: str, epoch: int) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": question}],
        "params": {"temperature": 1.0},
        "scope": {"epoch": epoch},
    }


def write_fixture(path: Path, skip: tuple[int, int] | None = None) -> dict[tuple[int, int], str]:
    expected = {}
    with path.open("wb") as out:
        for i, question in enumerate(QUESTIONS):
            for epoch in range(1, EPOCHS + 1):
                if (i, epoch) == skip:
                    continue
                answer = f"sample {i} epoch {epoch}"
                expected[(i, epoch)] = answer
                digest = request_hash(user_request(question, epoch))
                out.write(entry_line(digest, {"content": answer, "finish_reason": "stop"}) + b"\n")
    return expected


def run_eval(model: Model, tmp_path: Path, task: Task | None = None, **kwargs: Any) -> EvalLog:
    kwargs.setdefault("max_samples", 4)
    logs = eval(
        task or colours_task(),
        model=model,
        log_dir=str(tmp_path / "logs"),
        display="none",
        **kwargs,
    )
    assert len(logs) == 1
    return logs[0]


def completions(log: EvalLog) -> dict[tuple[int, int], str]:
    assert log.samples is not None
    return {(int(s.id), s.epoch): s.output.completion for s in log.samples}


@pytest.fixture
def replay_model(tmp_path: Path) -> Iterator[Model]:
    fixture = tmp_path / "baseline.jsonl"
    write_fixture(fixture)
    with get_model("replay/any-name", fixture=str(fixture), memoize=False) as model:
        yield model


# -- whole evals ------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_replayed_twice_each_sample_and_epoch_gets_its_own_answer(
    tmp_path: Path, no_leaks: None
) -> None:
    fixture = tmp_path / "baseline.jsonl"
    expected = write_fixture(fixture)
    runs = []
    for _ in range(2):
        with get_model("replay/any-name", fixture=str(fixture), memoize=False) as model:
            log = run_eval(model, tmp_path)
            assert isinstance(model.api, ReplayModelAPI)
            snapshot = model.api.provider.snapshot()
        assert log.status == "success"
        assert snapshot["served"] == len(QUESTIONS) * EPOCHS
        assert snapshot["misses"] == 0
        runs.append(completions(log))
    assert runs[0] == runs[1] == expected


@pytest.mark.timeout(120)
def test_record_then_replay_with_the_server_stopped(tmp_path: Path, no_leaks: None) -> None:
    fixture = tmp_path / "recorded.jsonl"
    server = ChatServer()
    try:
        # Answers finish out of the order they were asked in, as a real endpoint's do:
        # without the epoch in scope, the recording's order would not be the replay's.
        live = {
            "adapter": "openai",
            "model": "m",
            "base_url": server.base_url("jitter"),
            "max_retries": 0,
        }
        manifest = tmp_path / "record.toml"
        manifest.write_text(
            f'[provider]\nkind = "record"\nfixture = "{fixture.name}"\n'
            + "[provider.live]\n"
            + "".join(f"{k} = {json.dumps(v)}\n" for k, v in live.items())
        )
        with get_model("replay/any-name", manifest=str(manifest), memoize=False) as model:
            # Every (sample, epoch) at once: a sample's epochs ask the same thing together.
            recorded = completions(run_eval(model, tmp_path, max_samples=len(QUESTIONS) * EPOCHS))
        sent = [r.body for r in server.received]
    finally:
        server.close()
    assert len(sent) == len(QUESTIONS) * EPOCHS
    assert all("scope" not in body for body in sent)
    assert len(set(recorded.values())) == len(recorded)  # every call answered afresh
    assert load_fixture(fixture).snapshot()["entries"] == len(QUESTIONS) * EPOCHS

    replay_manifest = tmp_path / "replay.toml"
    replay_manifest.write_text(f'[provider]\nkind = "replay"\nfixture = "{fixture.name}"\n')
    for _ in range(2):
        with get_model("replay/any-name", manifest=str(replay_manifest), memoize=False) as model:
            assert completions(run_eval(model, tmp_path)) == recorded


@pytest.mark.timeout(120)
def test_a_miss_fails_its_sample_with_the_message_and_is_not_retried(
    tmp_path: Path, no_leaks: None
) -> None:
    fixture = tmp_path / "baseline.jsonl"
    expected = write_fixture(fixture, skip=(2, 3))
    with get_model("replay/any-name", fixture=str(fixture), memoize=False) as model:
        log = run_eval(model, tmp_path, fail_on_error=False)
        assert isinstance(model.api, ReplayModelAPI)
        snapshot = model.api.provider.snapshot()
    assert snapshot["misses"] == 1  # asked once: no retry
    assert log.samples is not None
    failed = [s for s in log.samples if s.error is not None]
    assert [(int(s.id), s.epoch) for s in failed] == [(2, 3)]
    digest = request_hash(user_request(QUESTIONS[2], 3))
    assert failed[0].error is not None
    assert f"{MISS} (request_hash: {digest})" in failed[0].error.message
    fine = {k: v for k, v in completions(log).items() if k != (2, 3)}
    assert fine == expected


@pytest.mark.timeout(120)
def test_private_miss_names_no_hash_anywhere_in_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    # Inspect then writes every frame's locals into the log's tracebacks.
    monkeypatch.setenv("INSPECT_TRACEBACK_LOCALS", "1")
    fixture = tmp_path / "baseline.jsonl"
    write_fixture(fixture, skip=(0, 1))
    digest = request_hash(user_request(QUESTIONS[0], 1))
    with get_model("replay/any-name", fixture=str(fixture), private=True, memoize=False) as model:
        log = run_eval(model, tmp_path, fail_on_error=False)
        assert isinstance(model.api, ReplayModelAPI)
        assert isinstance(model.api.provider, ReplayProvider)
        inspected = model.api.provider.inspect()
    assert inspected["misses"] == [{"request_hash": digest, "count": 1}]
    assert log.samples is not None
    errors = [s.error.message for s in log.samples if s.error is not None]
    assert errors and all(MISS in message for message in errors)
    with zipfile.ZipFile(log.location) as archive:
        stored = b"".join(archive.read(name) for name in archive.namelist())
    # A prefix: Inspect's tracebacks cut long values at the terminal's width.
    assert digest.removeprefix("sha256:")[:16].encode() not in stored


# -- the command line, as the docs show it ------------------------------------------------------


def inspect_cli(*args: str, logs: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "INSPECT_LOG_DIR": str(logs), "INSPECT_DISPLAY": "plain"}
    inspect = str(Path(sys.executable).with_name("inspect"))
    return subprocess.run(
        [inspect, "eval", "examples/inspect/task.py", "--model", "replay/any-name", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def only_log(logs: Path) -> EvalLog:
    (path,) = logs.glob("*.eval")
    return read_eval_log(str(path))


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "args",
    [
        ("-M", "fixture=examples/inspect/baseline.jsonl"),
        ("-M", "fixture=examples/inspect/baseline.jsonl", "-M", "private=true"),
        ("-M", "manifest=examples/inspect/replay.toml"),
    ],
)
def test_cli_one_liner(args: tuple[str, ...], tmp_path: Path, no_leaks: None) -> None:
    result = inspect_cli(*args, logs=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    log = only_log(tmp_path)
    assert log.status == "success"
    assert log.results is not None
    assert log.results.scores[0].metrics["accuracy"].value == 1.0
    assert log.samples is not None
    assert len(log.samples) == 6
    answers = {(s.id, s.epoch): s.output.completion for s in log.samples}
    assert answers[(1, 1)] == "Paris."
    assert answers[(1, 2)] == "It is Paris."


@pytest.mark.timeout(300)
def test_cli_miss_fails_the_eval_with_the_message(tmp_path: Path, no_leaks: None) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    result = inspect_cli("-M", f"fixture={empty}", logs=tmp_path / "logs")
    assert MISS in result.stdout + result.stderr
    log = only_log(tmp_path / "logs")
    assert log.status == "error"
    assert log.error is not None
    assert f"{MISS} (request_hash: sha256:" in log.error.message


def test_bundled_fixture_is_generated_from_the_task() -> None:
    sys.path.insert(0, str(ROOT / "examples" / "inspect"))
    try:
        import write_fixture as module
    finally:
        sys.path.remove(str(ROOT / "examples" / "inspect"))
    assert (ROOT / "examples" / "inspect" / "baseline.jsonl").read_bytes() == module.render()


# -- model args ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "key"),
    [
        ({}, "manifest"),
        ({"manifest": "a.toml", "fixture": "b.jsonl"}, "manifest"),
        ({"fixture": "b.jsonl", "colour": "red"}, "colour"),
        ({"manifest": "a.toml", "private": True}, "private"),
        ({"fixture": "b.jsonl", "private": "maybe"}, "private"),
        ({"fixture": "b.jsonl", "timeout": -1}, "timeout"),
    ],
)
def test_wrong_model_args_name_the_arg(args: dict[str, Any], key: str) -> None:
    with pytest.raises(ManifestError) as caught:
        ReplayModelAPI("any-name", **args)
    assert caught.value.key == key


# -- the mapping --------------------------------------------------------------------------------

WEATHER = ToolInfo(
    name="get_weather",
    description="Weather for a city",
    parameters=ToolParams(properties={"city": JSONSchema(type="string")}, required=["city"]),
)
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


def test_conversation_maps_as_the_openai_shape_does() -> None:
    conversation: list[ChatMessage] = [
        ChatMessageSystem(content="Be brief.", id="m1", source="input"),
        ChatMessageUser(content=[ContentText(text="Weather in Paris?")], id="m2"),
        ChatMessageAssistant(
            content="",
            tool_calls=[ToolCall(id="c1", function="get_weather", arguments={"city": "Paris"})],
            source="generate",
            model="replay/x",
        ),
        ChatMessageTool(content="sunny", tool_call_id="c1", function="get_weather"),
        ChatMessageTool(
            content="",
            tool_call_id="c2",
            error=ToolCallError(type="timeout", message="took too long"),
        ),
        ChatMessageUser(
            content=[ContentText(text="And this?"), ContentImage(image="https://x/y.png")]
        ),
    ]
    config = GenerateConfig(
        max_tokens=64,
        temperature=0.2,
        top_p=0.9,
        stop_seqs=["END"],
        seed=7,
        max_retries=3,
        timeout=30,
        max_connections=5,
        parallel_tool_calls=False,
        logit_bias={42: -1.0},
    )
    request = to_request(conversation, [WEATHER], "any", config, epoch=2)
    assert request == {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c1", "name": "get_weather", "arguments": '{"city":"Paris"}'}
                ],
            },
            {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
            {"role": "tool", "content": "Error: took too long", "tool_call_id": "c2"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "And this?"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "https://x/y.png", "detail": "auto"},
                    },
                ],
            },
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": WEATHER_SCHEMA,
            }
        ],
        "tool_choice": "required",
        "params": {
            "max_tokens": 64,
            "temperature": 0.2,
            "top_p": 0.9,
            "stop": ["END"],
            "seed": 7,
            "parallel_tool_calls": False,
            "logit_bias": {"42": -1.0},
        },
        "scope": {"epoch": 2},
    }
    request_hash(request)  # a valid neutral request


def test_message_ids_and_sources_are_not_part_of_the_request() -> None:
    one = [ChatMessageUser(content="hi", id="a", source="input", metadata={"k": 1})]
    other = [ChatMessageUser(content="hi", id="b")]
    config = GenerateConfig()
    assert to_request(one, [], "none", config) == to_request(other, [], "none", config)
    assert to_request(one, [], "none", config) == {"messages": [{"role": "user", "content": "hi"}]}


def test_tool_choice_is_left_out_without_tools_and_named_with_them() -> None:
    user = [ChatMessageUser(content="hi")]
    assert "tool_choice" not in to_request(user, [], "auto", GenerateConfig())
    named = to_request(user, [WEATHER], ToolFunction(name="get_weather"), GenerateConfig())
    assert named["tool_choice"] == {"name": "get_weather"}
    assert to_request(user, [WEATHER], "none", GenerateConfig())["tool_choice"] == "none"


def test_response_schema_and_extra_body() -> None:
    config = GenerateConfig(
        response_schema=ResponseSchema(name="answer", json_schema=JSONSchema(type="string")),
        extra_body={"reasoning": {"effort": "low"}},
    )
    request = to_request([ChatMessageUser(content="hi")], [], "none", config)
    assert request["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": {"type": "string"}},
    }
    assert request["params"] == {"reasoning": {"effort": "low"}}


def test_output_carries_tool_calls_stop_reason_and_usage() -> None:
    output = to_output(
        {
            "content": None,
            "tool_calls": [{"id": "c9", "name": "get_weather", "arguments": '{"city":"Lima"}'}],
            "finish_reason": "tool_calls",
            "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14},
        },
        "any-name",
        [WEATHER],
    )
    message = output.message
    assert message.text == ""
    assert message.tool_calls is not None
    assert message.tool_calls[0].id == "c9"
    assert message.tool_calls[0].function == "get_weather"
    assert message.tool_calls[0].arguments == {"city": "Lima"}
    assert output.stop_reason == "tool_calls"
    assert output.usage is not None
    assert (output.usage.input_tokens, output.usage.output_tokens) == (10, 4)


@pytest.mark.parametrize(
    ("response", "stop"),
    [
        ({"content": "x"}, "stop"),
        ({"content": "x", "finish_reason": "length"}, "max_tokens"),
        ({"content": "x", "finish_reason": "content_filter"}, "content_filter"),
        ({"content": "x", "finish_reason": "odd"}, "unknown"),
    ],
)
def test_stop_reasons(response: dict[str, Any], stop: str) -> None:
    output = to_output(response, "m", [])
    assert output.stop_reason == stop
    assert output.completion == "x"
    assert output.usage is None


@pytest.mark.parametrize("finish", [None, "stop", "refusal"])
def test_a_refusal_replays_as_a_refusal(finish: str | None) -> None:
    # A stored refusal is not an empty answer (docs/inspect.md, "Refusals").
    response: dict[str, Any] = {"content": None, "refusal": "I can't help with that."}
    if finish is not None:
        response["finish_reason"] = finish
    output = to_output(response, "m", [])
    assert output.stop_reason == "content_filter"
    choice = output.choices[0]
    assert choice.stop_details is not None
    assert choice.stop_details.type == "refusal"
    assert choice.stop_details.explanation == "I can't help with that."
    content = output.message.content
    assert isinstance(content, list)
    assert [(type(p), p.text, p.refusal) for p in content if isinstance(p, ContentText)] == [
        (ContentText, "I can't help with that.", True)
    ]
    assert output.completion == "I can't help with that."


@pytest.mark.parametrize(
    "response",
    [
        {"content": 3},
        {"content": ["a"]},
        {"tool_calls": [{"id": "c", "name": 5, "arguments": "{}"}]},
        {"tool_calls": [{"id": "c", "name": "get_weather", "arguments": {"city": "Lima"}}]},
        {"finish_reason": 1},
        {"usage": "lots"},
    ],
)
def test_a_stored_value_of_the_wrong_type_fails_closed(response: dict[str, Any]) -> None:
    # One tolerance (read_response): a wrong type is never stringified into an answer.
    with pytest.raises(Unexpressible, match=r"wrong type at `\$"):
        to_output(response, "m", [WEATHER])


def test_the_core_never_imports_inspect() -> None:
    code = (
        "import sys, replay_actor; "
        "from replay_actor import acquire, open_provider, request_hash; "
        "assert 'inspect_ai' not in sys.modules, 'inspect_ai imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_replay_allows_more_concurrency_than_a_live_endpoint(
    tmp_path: Path, chat: ChatServer
) -> None:
    fixture = tmp_path / "f.jsonl"
    fixture.write_bytes(b"")
    replay = ReplayModelAPI("any-name", fixture=str(fixture))
    manifest = tmp_path / "live.toml"
    manifest.write_text(
        '[provider]\nkind = "live"\nadapter = "openai"\nmodel = "m"\n'
        f'base_url = "{chat.base_url()}"\n'
    )
    live = ReplayModelAPI("any-name", manifest=str(manifest))
    try:
        assert replay.max_connections() == 64
        assert live.max_connections() == 10  # Inspect's own default
    finally:
        replay.close()
        live.close()


@pytest.mark.timeout(180)
def test_tool_loop_authored_from_misses_then_replayed(tmp_path: Path, no_leaks: None) -> None:
    """The authoring loop through Inspect's own tool loop: run, read the hash from the
    failed sample, add the entry, rerun, until the sample passes; then it replays alike."""
    from inspect_ai.solver import use_tools
    from inspect_ai.tool import tool

    @tool
    def add() -> Any:
        async def execute(x: int, y: int) -> int:
            """Add two numbers.

            Args:
                x: First number.
                y: Second number.
            """
            return x + y

        return execute

    def adding_task() -> Task:
        return Task(
            dataset=[Sample(input="What is 1 + 2?", target="3")],
            solver=[use_tools(add()), generate()],
            scorer=includes(),
        )

    fixture = tmp_path / "tools.jsonl"
    fixture.write_bytes(b"")
    answers = [
        {
            "content": None,
            "tool_calls": [{"id": "call_7", "name": "add", "arguments": '{"x": 1, "y": 2}'}],
            "finish_reason": "tool_calls",
        },
        {"content": "1 + 2 = 3", "finish_reason": "stop"},
    ]
    hashes = []
    for answer in answers:
        with get_model("replay/any-name", fixture=str(fixture), memoize=False) as model:
            log = run_eval(model, tmp_path, task=adding_task(), fail_on_error=False)
        assert log.samples is not None
        error = log.samples[0].error
        assert error is not None
        found = re.search(r"request_hash: (sha256:[0-9a-f]{64})", error.message)
        assert found is not None, error.message
        hashes.append(found[1])
        with fixture.open("ab") as out:
            out.write(entry_line(found[1], answer) + b"\n")
    assert hashes[0] != hashes[1]
    outputs = []
    for _ in range(2):
        with get_model("replay/any-name", fixture=str(fixture), memoize=False) as model:
            log = run_eval(model, tmp_path, task=adding_task())
        assert log.status == "success"
        assert log.samples is not None
        (sample,) = log.samples
        tool_messages = [m for m in sample.messages if isinstance(m, ChatMessageTool)]
        assert [m.text for m in tool_messages] == ["3"]
        outputs.append(sample.output.completion)
    assert outputs == ["1 + 2 = 3", "1 + 2 = 3"]


@pytest.mark.timeout(120)
def test_live_manifest_asks_the_endpoint_without_scope(
    tmp_path: Path, chat: ChatServer, no_leaks: None
) -> None:
    manifest = tmp_path / "live.toml"
    manifest.write_text(
        '[provider]\nkind = "live"\nadapter = "openai"\nmodel = "m"\nmax_retries = 0\n'
        f'base_url = "{chat.base_url()}"\n'
    )
    with get_model("replay/any-name", manifest=str(manifest), memoize=False) as model:
        answers = completions(run_eval(model, tmp_path))
    assert len(answers) == len(QUESTIONS) * EPOCHS
    assert chat.count("echo") == len(QUESTIONS) * EPOCHS
    assert all("scope" not in r.body for r in chat.received)
    assert all(r.body["temperature"] == 1.0 for r in chat.received)
