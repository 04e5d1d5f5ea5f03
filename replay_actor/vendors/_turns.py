"""A neutral conversation written as alternating turns, for the vendors whose APIs want
them (Anthropic messages, Gemini ``contents``): the live bodies of ``to_body``.

Leading system messages are said apart (``split_system``); the rest become turns
(``turns``): each ``tool`` message becomes a part of the user turn that follows (several
in a row share one, and a user message after them joins it), an assistant message a
model turn, and a system message once the conversation has begun has no form at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from .._errors import RequestError

__all__ = ["TurnForms", "split_system", "turns"]

Message = dict[str, Any]


class TurnForms(NamedTuple):
    """How one vendor writes a conversation's turns: ``tool_part`` makes a tool
    message's part, ``user_parts`` a user message's parts, ``user_turn`` a user turn of
    parts, ``model_turn`` an assistant message's turn; ``vendor`` names the API in
    errors."""

    vendor: str
    tool_part: Callable[[Message], Any]
    user_parts: Callable[[Message], list[Any]]
    user_turn: Callable[[list[Any]], Message]
    model_turn: Callable[[Message], Message]


def split_system(
    messages: list[Message], parts: Callable[[Any], list[Any]]
) -> tuple[list[Any], list[Message]]:
    """The leading system messages' content as one list of ``parts`` (what ``parts``
    makes of each content), and the messages after them."""
    system: list[Any] = []
    i = 0
    while i < len(messages) and messages[i]["role"] == "system":
        system.extend(parts(messages[i].get("content")))
        i += 1
    return system, messages[i:]


def turns(messages: list[Message], forms: TurnForms) -> list[Message]:
    """``messages`` (no leading system message) as alternating turns, written in the
    vendor's ``forms`` (called in the conversation's order)."""
    vendor, tool_part, user_parts, user_turn, model_turn = forms
    out: list[Message] = []
    pending: list[Any] = []  # tool results waiting for their user turn
    for message in messages:
        role = message["role"]
        if role == "tool":
            pending.append(tool_part(message))
            continue
        if role == "user":
            out.append(user_turn(pending + user_parts(message)))
            pending = []
            continue
        if pending:
            out.append(user_turn(pending))
            pending = []
        if role == "system":
            raise RequestError(
                f"a system message after the conversation began has no {vendor} form"
            )
        out.append(model_turn(message))
    if pending:
        out.append(user_turn(pending))
    return out
