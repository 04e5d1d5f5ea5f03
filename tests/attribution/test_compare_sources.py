"""Run logs from every source compare (docs/attribution.md): ``run --log``, ``serve
--log``, the in-process openai client, the pytest plugin and Inspect, each through the
manifest or flag its users have."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from replay_actor import request_hash
from replay_actor.cli import main
from replay_actor.serving import Call, Exchange
from tests.support.frontdoor_util import run_cli, serving, write_fixture

pytestmark = pytest.mark.usefixtures("no_leaks")
pytest_plugins = ["pytester"]

TEXTS = ("hi", "bye")


def _neutral(text: str) -> dict[str, Any]:
    """The neutral request the openai SDK's chat call for ``text`` becomes."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]})
    prepared = Exchange("openai").prepare("POST", "/v1/chat/completions", body.encode())
    assert isinstance(prepared, Call)
    return prepared.request


def _manifest(folder: Path, log: str | None = None) -> Path:
    fixture = write_fixture(
        folder / "fixture.jsonl",
        {request_hash(_neutral(t)): {"content": f"re: {t}"} for t in TEXTS},
    )
    lines = ["[provider]", 'kind = "replay"', f"fixture = {json.dumps(str(fixture))}"]
    if log is not None:
        lines.append(f"log = {json.dumps(log)}")
    path = folder / f"replay-{log or 'nolog'}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _compare(base: Path, cand: Path) -> int:
    return main(["compare", str(base), str(cand), "--json"])


def _in_process(folder: Path) -> Path:
    from replay_actor.integrations.sdk import openai_client

    client = openai_client(_manifest(folder, "in-process.log"))
    try:
        for text in TEXTS:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])
    finally:
        client.close()
    return folder / "in-process.log"


def _run(folder: Path) -> Path:
    script = (
        "import openai\n"
        "c = openai.OpenAI(max_retries=0)\n"
        f"for text in {TEXTS!r}:\n"
        "    c.chat.completions.create(model='m', messages=[{'role': 'user', 'content': text}])\n"
    )
    log = folder / "run.log"
    done = run_cli(_manifest(folder), [sys.executable, "-c", script], flags=("--log", str(log)))
    assert done.returncode == 0, done.stderr
    return log


def _serve(folder: Path) -> Path:
    import httpx

    log = folder / "serve.log"
    with serving(_manifest(folder), "--log", str(log)) as (_, info):
        for text in TEXTS:
            answer = httpx.post(
                info["openai_base_url"] + "/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": text}]},
                headers={"authorization": f"Bearer {info['token']}"},
                timeout=30,
            )
            assert answer.status_code == 200
    return log


def test_run_serve_and_the_in_process_client_log_the_same_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = [_in_process(tmp_path), _run(tmp_path), _serve(tmp_path)]
    for log in logs[1:]:
        assert _compare(logs[0], log) == 0, capsys.readouterr().out
        document = json.loads(capsys.readouterr().out)
        assert document["summary"]["identical"] == 2
        assert document["baseline"]["calls"] == document["candidate"]["calls"] == 2


def test_the_pytest_plugin_logs_through_the_manifest(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = _manifest(pytester.path, "plugin.log")
    pytester.makeini(f"[pytest]\nreplay_manifest = {manifest.name}\n")
    requests = [_neutral(t) for t in TEXTS]
    pytester.makepyfile(
        test_app=textwrap.dedent(
            f"""
            def test_calls(replay_provider):
                for request in {requests!r}:
                    replay_provider.complete(request)
            """
        )
    )
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:deepeval", "-p", "no:asyncio"
    )
    result.assert_outcomes(passed=1)
    plugin_log = pytester.path / "plugin.log"
    lines = [json.loads(line) for line in plugin_log.read_text().splitlines()]
    # The test is the calls' eval row: one sample, however many calls it makes.
    assert [line["row"] for line in lines] == [{"test": "test_app.py::test_calls"}] * 2
    first_run = plugin_log.rename(pytester.path / "first.log")
    Path(str(plugin_log) + ".requests.jsonl").rename(pytester.path / "first.log.requests.jsonl")
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly").assert_outcomes(passed=1)
    capsys.readouterr()
    assert _compare(first_run, plugin_log) == 0
    out = capsys.readouterr().out
    (sample,) = json.loads(out[out.index("{") :])["samples"]
    assert (sample["sample"], sample["baseline_calls"]) == ("test_app.py::test_calls", 2)


def test_inspect_logs_through_the_manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("inspect_ai")
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import GenerateConfig, get_model
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate

    for name, value in {
        "INSPECT_LOG_DIR": tmp_path / "logs",
        "INSPECT_CACHE_DIR": tmp_path / "cache",
        "XDG_DATA_HOME": tmp_path / "data",
    }.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.setenv("INSPECT_DISPLAY", "none")
    questions = ["Name a colour.", "Name a fruit."]
    fixture = tmp_path / "inspect.jsonl"
    entries = {}
    for question in questions:
        for epoch in (1, 2):
            request = {
                "messages": [{"role": "user", "content": question}],
                "params": {"temperature": 1.0},
                "scope": {"epoch": epoch},
            }
            entries[request_hash(request)] = {"content": "x", "finish_reason": "stop"}
    write_fixture(fixture, entries)
    logs = []
    for name in ("base.log", "cand.log"):
        manifest = tmp_path / f"{name}.toml"
        manifest.write_text(
            f'[provider]\nkind = "replay"\nfixture = "inspect.jsonl"\nlog = "{name}"\n'
        )
        task = Task(
            dataset=[Sample(id=i, input=q, target="x") for i, q in enumerate(questions)],
            solver=generate(),
            scorer=includes(),
            epochs=2,
            config=GenerateConfig(temperature=1.0),
        )
        with get_model("replay/any", manifest=str(manifest), memoize=False) as model:
            (log,) = eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
        assert log.status == "success"
        logs.append(tmp_path / name)
    assert _compare(*logs) == 0
