"""An AutoGen evaluation of three questions, three at a time (docs/eval-tools.md): an
``AssistantAgent`` per question, scored by exact match.

Nothing here knows about replay-actor: ``OpenAIChatCompletionClient`` reads
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` (through the OpenAI client), which
``replay-actor run`` points at its front door. AutoGen's latest release would downgrade
packages the project's other extras need, so this runs from an environment of its own
(``make evaltools``). ``--candidate`` asks to see the working for the question that
multiplies, so only that sample's prompts change.
"""

from __future__ import annotations

import asyncio
import sys

from autogen_agentchat.agents import AssistantAgent
from autogen_ext.models.openai import OpenAIChatCompletionClient

EXPECTED = {"What is 2 + 3?": "5", "What is 6 times 7?": "42", "What is 9 - 4?": "5"}
CANDIDATE = "--candidate" in sys.argv


def asked(question: str) -> str:
    """The candidate's one change."""
    return question + " Show your working." if CANDIDATE and " times " in question else question


async def run(question: str) -> str:
    client = OpenAIChatCompletionClient(model="gpt-4.1-mini", temperature=0)
    agent = AssistantAgent(
        "calculator", model_client=client, system_message="Answer with the number only."
    )
    try:
        result = await agent.run(task=asked(question))
    except Exception as exc:  # a missed call: the sample fails, the others go on
        return f"failed: {exc}"
    finally:
        await client.close()
    return str(result.messages[-1].content)


async def main() -> None:
    answers = await asyncio.gather(*map(run, EXPECTED))
    for (question, expected), answer in zip(EXPECTED.items(), answers, strict=True):
        print(question, "->", answer, "|", "correct" if answer == expected else "wrong")


if __name__ == "__main__":
    asyncio.run(main())
