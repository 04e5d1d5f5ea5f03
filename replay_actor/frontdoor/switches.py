"""The ecosystem's offline and no-telemetry switches that ``replay-actor run`` sets for
COMMAND (docs/front-door.md, "Incidental traffic").

Runs in: the ``run`` process, while it builds the child's environment.

Evaluation tools send traffic that is no call of the evaluation's: usage telemetry,
update checks, downloads of files a cache already holds. Under a sealed run each such
request is refused and counted, and a complete replay exits 4; unsealed, it reaches the
network. Each tool has its own switch, read from its source (or, where the tool is not
installed here, its documentation); ``run`` sets each one only where the user's
environment does not already name it (a value the user chose, even ``0``, is kept):

- the **no-telemetry** switches in every run (replay, record, live): no answer
  depends on them, and a recording and its replay then send the same traffic;
- the **offline** switches only in a sealed run: unsealed (a first recording) the tools
  may have to download what they need once; sealed, nothing can be downloaded, and a
  tool told it is offline reads its cache at once instead of failing on the seal.

:data:`SWITCHES` is the table docs/front-door.md shows (a test holds them together).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

__all__ = ["SWITCHES", "Switch", "switch_variables"]


class Switch(NamedTuple):
    """One variable ``run`` sets: its value, the tools that read it, why."""

    name: str
    value: str
    readers: str
    why: str
    #: Set only in a sealed run (an offline switch); else in every run.
    sealed_only: bool = False


SWITCHES: Final[tuple[Switch, ...]] = (
    Switch(
        "DO_NOT_TRACK",
        "1",
        "huggingface_hub; tools that follow the Console Do Not Track convention",
        "usage telemetry",
    ),
    Switch(
        "HF_HUB_DISABLE_TELEMETRY",
        "1",
        "huggingface_hub (and datasets, evaluate, transformers through it)",
        "usage telemetry",
    ),
    Switch(
        "PROMPTFOO_DISABLE_TELEMETRY",
        "1",
        "promptfoo",
        "usage telemetry (its r.promptfoo.app beacon is sent even so: ignore that host)",
    ),
    Switch(
        "PROMPTFOO_DISABLE_UPDATE",
        "true",
        "promptfoo",
        "its latest-version check (api.promptfoo.dev)",
    ),
    Switch("DEEPEVAL_TELEMETRY_OPT_OUT", "YES", "DeepEval", "usage telemetry"),
    Switch("CREWAI_DISABLE_TELEMETRY", "true", "CrewAI", "usage telemetry"),
    Switch("CREWAI_DISABLE_VERSION_CHECK", "true", "CrewAI", "its version check (PyPI)"),
    Switch(
        "OPENAI_AGENTS_DISABLE_TRACING",
        "1",
        "openai-agents (Python), @openai/agents (JavaScript)",
        "trace export to the vendor's platform, which the run's token cannot authorise",
    ),
    Switch(
        "MASTRA_TELEMETRY_DISABLED",
        "1",
        "Mastra (@mastra/core)",
        "usage telemetry (PostHog events of a Mastra instance)",
    ),
    Switch("HAYSTACK_TELEMETRY_ENABLED", "False", "Haystack", "usage telemetry"),
    Switch("ANONYMIZED_TELEMETRY", "False", "Chroma, browser-use", "usage telemetry"),
    Switch("RAGAS_DO_NOT_TRACK", "true", "ragas", "usage telemetry"),
    Switch(
        "HF_HUB_OFFLINE",
        "1",
        "huggingface_hub (models, tokenizers, datasets' and metrics' files)",
        "downloads: files are read from the local cache",
        sealed_only=True,
    ),
    Switch(
        "HF_DATASETS_OFFLINE",
        "1",
        "datasets (lm-evaluation-harness's tasks)",
        "downloads and hub look-ups (lm_eval's s3 fetches)",
        sealed_only=True,
    ),
    Switch(
        "HF_EVALUATE_OFFLINE",
        "1",
        "evaluate (lm-evaluation-harness's metrics)",
        "downloads of metric scripts",
        sealed_only=True,
    ),
    Switch(
        "TRANSFORMERS_OFFLINE",
        "1",
        "transformers, huggingface_hub",
        "downloads of models and tokenizers",
        sealed_only=True,
    ),
    Switch(
        "LITELLM_LOCAL_MODEL_COST_MAP",
        "True",
        "LiteLLM",
        "the price list fetched at import (the bundled one is used)",
        sealed_only=True,
    ),
    Switch(
        "OTEL_SDK_DISABLED",
        "true",
        "OpenTelemetry SDKs (CrewAI's traces among them)",
        "span export to a collector the seal makes unreachable",
        sealed_only=True,
    ),
)


def switch_variables(environ: Mapping[str, str], *, sealed: bool) -> dict[str, str]:
    """The switches to add to COMMAND's environment: every one ``environ`` does not
    name, the offline ones only when ``sealed``."""
    return {
        switch.name: switch.value
        for switch in SWITCHES
        if switch.name not in environ and (sealed or not switch.sealed_only)
    }
