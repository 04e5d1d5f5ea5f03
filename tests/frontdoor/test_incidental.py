"""Two evaluation tools whose incidental traffic failed every complete replay
(docs/front-door.md, "Incidental traffic"), each recorded through a loopback vendor and
replayed sealed under ``replay-actor run``:

- promptfoo (npm) sends a telemetry beacon to r.promptfoo.app even with its telemetry
  switched off: with the host in ``provider.ignore`` the replay exits 0;
- lm-evaluation-harness's Hugging Face libraries fetch from s3 unless told they are
  offline: ``run``'s offline switches make the replay exit 0; with them overridden, the
  fetch is blocked (exit 4) unless its host is ignored.

Both record under ``--seal namespace`` as well, so no test reaches beyond loopback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.chat_server import ChatServer
from tests.support.frontdoor_util import BIN, run_cli, summary
from tests.support.paths import ROOT

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(600)]

NODE = shutil.which("node")
PROMPTFOO = ROOT / ".cache" / "node" / "node_modules" / ".bin" / "promptfoo"
SEALED = ("--seal", "namespace")


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


def _manifests(folder: Path, base_url: str, more: str = "") -> tuple[Path, Path]:
    record = folder / "record.toml"
    record.write_text(
        f'[provider]\nkind = "record"\nfixture = "tool.jsonl"\n{more}'
        f'[provider.live]\nadapter = "openai"\nmodel = "gpt-live"\nbase_url = "{base_url}"\n'
    )
    replay = folder / "replay.toml"
    replay.write_text(f'[provider]\nkind = "replay"\nfixture = "tool.jsonl"\n{more}')
    return record, replay


# -- promptfoo -------------------------------------------------------------------------------

PROMPTFOO_CONFIG = textwrap.dedent(
    """
    description: replay-actor incidental traffic
    prompts:
      - "Say hello to {{name}}"
    providers:
      - id: openai:chat:gpt-4o-mini
    tests:
      - vars: {name: Ada}
      - vars: {name: Grace}
    """
)


def _outputs(path: Path) -> list[str]:
    results = json.loads(path.read_text())["results"]["results"]
    return sorted(r["response"]["output"] for r in results)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_promptfoo_replays_with_exit_0_with_its_beacon_ignored(
    tmp_path: Path, chat: ChatServer
) -> None:
    if not PROMPTFOO.exists():
        pytest.fail(f"promptfoo is not in {PROMPTFOO.parent}: `make test` installs it")
    (tmp_path / "promptfooconfig.yaml").write_text(PROMPTFOO_CONFIG)
    env = {**os.environ, "PROMPTFOO_CONFIG_DIR": str(tmp_path / "promptfoo")}
    for name in ("PROMPTFOO_DISABLE_TELEMETRY", "PROMPTFOO_DISABLE_UPDATE"):
        env.pop(name, None)  # run sets them

    def evaluate(manifest: Path, out: str, *flags: str) -> subprocess.CompletedProcess[str]:
        command = [str(PROMPTFOO), "eval", "--no-cache", "--no-table", "-o", out]
        return run_cli(manifest, command, flags=flags, env=env, cwd=tmp_path, timeout=300)

    ignore = 'ignore = ["r.promptfoo.app"]\n'
    record, replay = _manifests(tmp_path, chat.base_url(), ignore)
    recorded = evaluate(record, "recorded.json", *SEALED)
    assert recorded.returncode == 0, recorded.stderr
    assert summary(recorded.stderr).startswith("replay-actor: 2 served, 0 missed, 0 exhausted")
    replayed = evaluate(replay, "replayed.json")
    assert replayed.returncode == 0, replayed.stderr
    line = summary(replayed.stderr)
    assert line.startswith("replay-actor: 2 served, 0 missed, 0 exhausted, 0 blocked, 1 ignored;")
    assert line.endswith("; sealed (namespace)")
    outputs = _outputs(tmp_path / "replayed.json")
    assert outputs == _outputs(tmp_path / "recorded.json")
    assert sorted(o.split(": ", 1)[1] for o in outputs) == [
        "Say hello to Ada",
        "Say hello to Grace",
    ]
    # Without the host ignored, the same beacon is a tool's miss: the run fails (exit 4).
    (tmp_path / "replay.toml").write_text('[provider]\nkind = "replay"\nfixture = "tool.jsonl"\n')
    blocked = evaluate(replay, "blocked.json")
    assert blocked.returncode == 4
    assert "2 served, 1 missed, 0 exhausted, 0 blocked;" in summary(blocked.stderr)
    assert 'add "r.promptfoo.app" to provider.ignore' in blocked.stderr


# -- lm-evaluation-harness -------------------------------------------------------------------

TASK = textwrap.dedent(
    """
    task: replay_local
    dataset_path: json
    dataset_kwargs:
      data_files:
        test: {questions}
    test_split: test
    output_type: generate_until
    doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
    doc_to_target: "{{{{answer}}}}"
    generation_kwargs:
      until: ["\\n\\n"]
      max_gen_toks: 16
      do_sample: false
    metric_list:
      - metric: exact_match
    """
)
QUESTIONS = (
    '{"question": "What is 2 + 2?", "answer": "4"}\n'
    '{"question": "What is the capital of France?", "answer": "Paris"}\n'
)


@pytest.mark.slow  # most of a minute or more: make test-tools runs it
def test_lm_eval_replays_with_exit_0_offline_or_with_its_fetch_ignored(
    tmp_path: Path, chat: ChatServer
) -> None:
    pytest.importorskip("lm_eval", reason="the evals extra (make test installs it)")
    (tmp_path / "questions.jsonl").write_text(QUESTIONS)
    (tmp_path / "replay_local.yaml").write_text(TASK.format(questions=tmp_path / "questions.jsonl"))
    # lm_eval ignores OPENAI_BASE_URL: the front door's URL goes into --model_args.
    command = [
        "sh",
        "-c",
        f'exec "{BIN / "lm_eval"}" --model local-chat-completions --model_args '
        '"model=gpt-test,base_url=$OPENAI_BASE_URL/chat/completions,num_concurrent=1,'
        'max_retries=1" --tasks replay_local --include_path "$0" --apply_chat_template '
        '--output_path "$0/out"',
        str(tmp_path),
    ]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env = {**base, "HF_HOME": str(tmp_path / "hf")}
    record, replay = _manifests(tmp_path, chat.base_url())

    recorded = run_cli(record, command, flags=SEALED, env=env, timeout=300)
    assert recorded.returncode == 0, recorded.stderr
    assert summary(recorded.stderr).startswith(
        "replay-actor: 2 served, 0 missed, 0 exhausted, 0 blocked;"
    )
    # Sealed, run's offline switches: the libraries read their cache, nothing is fetched.
    replayed = run_cli(replay, command, env=env, timeout=300)
    assert replayed.returncode == 0, replayed.stderr
    assert summary(replayed.stderr).startswith(
        "replay-actor: 2 served, 0 missed, 0 exhausted, 0 blocked;"
    )
    # The user's own values win: online, the libraries fetch, and the replay misses...
    online = {**env, "HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0", "HF_EVALUATE_OFFLINE": "0"}
    blocked = run_cli(replay, command, env=online, timeout=300)
    assert blocked.returncode == 4, blocked.stderr
    # (a tool's exchange the fixture lacks: a miss, which names the way out)
    assert 'add "s3.amazonaws.com" to provider.ignore' in blocked.stderr
    # ... unless the manifest ignores those hosts.
    replay.write_text(
        '[provider]\nkind = "replay"\nfixture = "tool.jsonl"\n'
        'ignore = ["s3.amazonaws.com", "*.huggingface.co"]\n'
    )
    ignored = run_cli(replay, command, env=online, timeout=300)
    assert ignored.returncode == 0, ignored.stderr
    line = summary(ignored.stderr)
    assert line.startswith("replay-actor: 2 served, 0 missed, 0 exhausted, 0 blocked, ")
    assert " ignored; " in line
