"""A LangGraph evaluation of three questions, three at a time (docs/eval-tools.md).

Nothing here knows about replay-actor: ``ChatOpenAI`` reads ``OPENAI_BASE_URL``, which
``replay-actor run`` points at its front door. ``--candidate`` asks to see the working
for the question that multiplies, so only that sample's prompts change.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, TypedDict

from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph

QUESTIONS = ["What is 2 + 3?", "What is 6 times 7?", "What is 9 - 4?"]
CANDIDATE = "--candidate" in sys.argv
SYSTEM = ("system", "Answer with the number only.")
llm = ChatOpenAI(model="gpt-4.1-mini", temperature=0)


class State(TypedDict, total=False):
    question: str
    answer: str
    checked: str


def asked(question: str) -> str:
    """The candidate's one change."""
    return question + " Show your working." if CANDIDATE and " times " in question else question


async def solve(state: State) -> dict[str, Any]:
    reply = await llm.ainvoke([SYSTEM, ("user", asked(state["question"]))])
    return {"answer": reply.content}


async def check(state: State) -> dict[str, Any]:
    turns = [SYSTEM, ("user", asked(state["question"])), ("assistant", state["answer"])]
    reply = await llm.ainvoke([*turns, ("user", "Check it once more: the number only.")])
    return {"checked": reply.content}


def main() -> None:
    graph = StateGraph(State)
    graph.add_node("solve", solve)
    graph.add_node("check", check)
    graph.add_edge(START, "solve")
    graph.add_edge("solve", "check")
    graph.add_edge("check", END)
    app = graph.compile()
    runs = app.abatch([{"question": q} for q in QUESTIONS], return_exceptions=True)
    for question, result in zip(QUESTIONS, asyncio.run(runs), strict=True):
        print(question, "->", result if isinstance(result, Exception) else result["checked"])


if __name__ == "__main__":
    main()
