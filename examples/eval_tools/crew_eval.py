"""A CrewAI evaluation of three questions, three at a time (docs/eval-tools.md).

Nothing here knows about replay-actor: ``LLM(model="openai/...")`` reads
``OPENAI_BASE_URL``, which ``replay-actor run`` points at its front door. CrewAI's
release needs openai<3, so this runs from an environment of its own (``make crewai``).
``--candidate`` asks to see the working for the question that multiplies.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

from crewai import LLM, Agent, Crew, Task

QUESTIONS = ["What is 2 + 3?", "What is 6 times 7?", "What is 9 - 4?"]
CANDIDATE = "--candidate" in sys.argv


def asked(question: str) -> str:
    """The candidate's one change."""
    return question + " Show your working." if CANDIDATE and " times " in question else question


def run(question: str) -> str:
    llm = LLM(model="openai/gpt-4.1-mini", temperature=0)
    agent = Agent(role="Calculator", goal="Answer arithmetic", backstory="Exact.", llm=llm)
    task = Task(description=asked(question), expected_output="The number only.", agent=agent)
    try:
        return str(Crew(agents=[agent], tasks=[task]).kickoff())
    except Exception as exc:  # a missed call, after CrewAI's own three tries
        return f"failed: {exc}"


def main() -> None:
    with ThreadPoolExecutor(3) as pool:
        for question, answer in zip(QUESTIONS, pool.map(run, QUESTIONS), strict=True):
            print(question, "->", answer)


if __name__ == "__main__":
    main()
