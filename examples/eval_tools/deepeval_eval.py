"""A DeepEval evaluation of three questions (docs/eval-tools.md): the answers come from
the model through the OpenAI client, and a G-Eval metric whose judge is the model too
scores them against the expected numbers.

Nothing here knows about replay-actor: ``AsyncOpenAI()`` and DeepEval's ``OpenAIModel`` read
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``, which ``replay-actor run`` points at its front
door, so the judge's calls are recorded and replayed as the answers' are. ``--candidate``
asks to see the working for the question that multiplies, so only that sample's prompts
change.
"""

from __future__ import annotations

import asyncio
import sys

from deepeval.evaluate import AsyncConfig, DisplayConfig, ErrorConfig, evaluate
from deepeval.metrics import BaseMetric, GEval
from deepeval.models import OpenAIModel
from deepeval.test_case import LLMTestCase, SingleTurnParams
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam

EXPECTED = {"What is 2 + 3?": "5", "What is 6 times 7?": "42", "What is 9 - 4?": "5"}
CANDIDATE = "--candidate" in sys.argv
MODEL = "gpt-4.1-mini"


def asked(question: str) -> str:
    """The candidate's one change."""
    return question + " Show your working." if CANDIDATE and " times " in question else question


async def answers() -> list[str]:
    client = AsyncOpenAI(max_retries=0)

    async def one(question: str) -> str:
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": "Answer with the number only."},
            {"role": "user", "content": asked(question)},
        ]
        try:
            reply = await client.chat.completions.create(
                model=MODEL, messages=messages, temperature=0
            )
        except Exception as exc:  # a missed call: the sample fails, the others go on
            return f"failed: {exc}"
        return reply.choices[0].message.content or ""

    return await asyncio.gather(*map(one, EXPECTED))


def main() -> None:
    cases = [
        LLMTestCase(input=asked(question), actual_output=output, expected_output=expected)
        for (question, expected), output in zip(
            EXPECTED.items(), asyncio.run(answers()), strict=True
        )
    ]
    correct: BaseMetric = GEval(
        name="Correctness",
        evaluation_steps=["Check that the actual output states the expected number."],
        evaluation_params=[
            SingleTurnParams.INPUT,
            SingleTurnParams.ACTUAL_OUTPUT,
            SingleTurnParams.EXPECTED_OUTPUT,
        ],
        model=OpenAIModel(model=MODEL),
    )
    result = evaluate(
        cases,
        [correct],
        async_config=AsyncConfig(max_concurrent=3),
        display_config=DisplayConfig(print_results=False, inspect_after_run=False),
        error_config=ErrorConfig(ignore_errors=True),
    )
    for test in result.test_results:
        (metric,) = test.metrics_data or []
        verdict = metric.error or f"score {metric.score}"
        print(test.input, "->", test.actual_output, "|", verdict)


if __name__ == "__main__":
    main()
