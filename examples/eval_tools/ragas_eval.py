"""A ragas evaluation of three questions, three at a time (docs/eval-tools.md): the
answers come from the model through the OpenAI client, and ragas's answer accuracy (two
judge prompts per sample, the model again) scores each against its reference.

Nothing here knows about replay-actor: ``AsyncOpenAI()`` reads ``OPENAI_BASE_URL`` and
``OPENAI_API_KEY``, which ``replay-actor run`` points at its front door, and ragas's judge
asks through the same client. ragas's latest release would downgrade packages the
project's other extras need, so this runs from an environment of its own (``make
evaltools``). ``--candidate`` asks to see the working for the question that multiplies,
so only that sample's prompts change.
"""

from __future__ import annotations

import asyncio
import sys

from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam
from ragas.llms import llm_factory
from ragas.metrics.collections import AnswerAccuracy

EXPECTED = {"What is 2 + 3?": "5", "What is 6 times 7?": "42", "What is 9 - 4?": "5"}
CANDIDATE = "--candidate" in sys.argv
MODEL = "gpt-4.1-mini"


def asked(question: str) -> str:
    """The candidate's one change."""
    return question + " Show your working." if CANDIDATE and " times " in question else question


async def main() -> None:
    client = AsyncOpenAI(max_retries=0)
    accuracy = AnswerAccuracy(llm=llm_factory(MODEL, client=client, temperature=0))

    async def sample(question: str, reference: str) -> str:
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": "Answer with the number only."},
            {"role": "user", "content": asked(question)},
        ]
        try:
            reply = await client.chat.completions.create(
                model=MODEL, messages=messages, temperature=0
            )
        except Exception as exc:  # a missed call: the sample fails, unscored
            return f"failed: {exc}"
        response = reply.choices[0].message.content or ""
        score = await accuracy.ascore(
            user_input=asked(question), response=response, reference=reference
        )
        return f"{response} | answer accuracy {score.value}"

    results = await asyncio.gather(*(sample(q, r) for q, r in EXPECTED.items()))
    for question, result in zip(EXPECTED, results, strict=True):
        print(question, "->", result)


if __name__ == "__main__":
    asyncio.run(main())
