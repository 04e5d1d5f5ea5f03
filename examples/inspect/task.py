"""An ordinary Inspect AI task: nothing in it knows about replay-actor (docs/inspect.md).

    inspect eval examples/inspect/task.py --model replay/any-name \\
        -M fixture=examples/inspect/baseline.jsonl
"""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import includes
from inspect_ai.solver import generate

QUESTIONS = [
    ("What is the capital of France? Answer in one word.", "Paris"),
    ("What is the capital of Japan? Answer in one word.", "Tokyo"),
    ("What is the capital of Peru? Answer in one word.", "Lima"),
]


@task
def capitals() -> Task:
    return Task(
        dataset=[Sample(input=question, target=answer) for question, answer in QUESTIONS],
        solver=generate(),
        scorer=includes(),
        epochs=2,
    )
