"""An Inspect AI eval of twenty arithmetic questions, for attribution (docs/attribution.md).

The candidate (``-T candidate=true``) changes one solver step: it asks to see the
working for multiplications, so the prompts of three known samples (q5, q12, q18)
change and every other prompt stays the same. Nothing here knows about replay-actor.

    inspect eval arithmetic.py --model replay/arith -M manifest=base.toml --max-connections 10
"""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import includes
from inspect_ai.solver import Generate, Solver, TaskState, generate, solver, system_message

#: (id, a, operator, b): q5, q12 and q18 multiply.
QUESTIONS = [
    ("q1", 12, "+", 30),
    ("q2", 7, "+", 8),
    ("q3", 41, "-", 19),
    ("q4", 25, "+", 25),
    ("q5", 6, "times", 7),
    ("q6", 90, "-", 45),
    ("q7", 13, "+", 29),
    ("q8", 64, "-", 32),
    ("q9", 3, "+", 95),
    ("q10", 50, "-", 18),
    ("q11", 22, "+", 22),
    ("q12", 9, "times", 8),
    ("q13", 71, "-", 70),
    ("q14", 38, "+", 4),
    ("q15", 16, "+", 61),
    ("q16", 80, "-", 27),
    ("q17", 11, "+", 11),
    ("q18", 12, "times", 5),
    ("q19", 99, "-", 9),
    ("q20", 45, "+", 46),
]


def _solve(a: int, op: str, b: int) -> int:
    return a + b if op == "+" else a - b if op == "-" else a * b  # "times"


@solver
def ask(candidate: bool = False) -> Solver:
    """The step the candidate changes: for a multiplication, ask for the working."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if candidate and " times " in state.user_prompt.text:
            state.user_prompt.text += " Show your working."
        return state

    return solve


@task
def arithmetic(candidate: bool = False) -> Task:
    return Task(
        dataset=[
            Sample(id=sid, input=f"What is {a} {op} {b}?", target=str(_solve(a, op, b)))
            for sid, a, op, b in QUESTIONS
        ],
        solver=[system_message("Answer with the number only."), ask(candidate), generate()],
        scorer=includes(),
    )
