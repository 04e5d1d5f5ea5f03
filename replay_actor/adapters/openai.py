"""The built-in ``openai`` adapter: OpenAI-compatible chat completions at any ``base_url``.

Runs in: the caller (a live or record provider's calls).

It maps the plain normalised neutral request (docs/fixture-format.md, "The request") to
a ``POST {base_url}/chat/completions`` body and the vendor's answer back to the neutral
response. Timeouts, retries and error hygiene are ``_http.HTTPAdapter``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from .._errors import RequestError
from ._config import HTTPConfig
from ._http import HTTPAdapter, Malformed

__all__ = ["DEFAULT_BASE_URL", "OpenAIAdapter", "from_openai_response", "to_openai_body"]

DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
_TOOL_CHOICE_WORDS: Final = frozenset({"auto", "none", "required"})
_RESERVED_BODY_KEYS: Final = frozenset(
    {"model", "messages", "tools", "tool_choice", "response_format", "stream"}
)


# -- mapping ----------------------------------------------------------------------------------


def _message(message: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content")}
    if "name" in message:
        out["name"] = message["name"]
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
            for call in message["tool_calls"]
        ]
    if "tool_call_id" in message:
        out["tool_call_id"] = message["tool_call_id"]
    return out


def _tool(tool: dict[str, Any]) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool["name"]}
    if "description" in tool:
        function["description"] = tool["description"]
    function["parameters"] = tool.get("parameters") or {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


def _tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, str):
        if choice in _TOOL_CHOICE_WORDS:
            return choice
        return {"type": "function", "function": {"name": choice}}
    if "type" not in choice and set(choice) == {"name"}:
        return {"type": "function", "function": {"name": choice["name"]}}
    return choice


def to_openai_body(request: dict[str, Any], model: str) -> dict[str, Any]:
    """The chat-completions body for a plain normalised neutral request.

    ``params`` are merged into the body first; they may not set a key the mapping owns
    (``model``, ``messages``, ``tools``, ``tool_choice``, ``response_format``, ``stream``).
    """
    params: dict[str, Any] = request.get("params", {})
    clash = sorted(_RESERVED_BODY_KEYS.intersection(params))
    if clash:
        raise RequestError(f"params may not set {clash[0]!r} (the adapter owns it)")
    body: dict[str, Any] = dict(params)
    body["model"] = model
    body["messages"] = [_message(m) for m in request["messages"]]
    if request.get("tools"):
        body["tools"] = [_tool(t) for t in request["tools"]]
    if "tool_choice" in request:
        body["tool_choice"] = _tool_choice(request["tool_choice"])
    if "response_format" in request:
        body["response_format"] = request["response_format"]
    return body


def _tool_calls(raw: Any) -> list[dict[str, str]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise Malformed("tool_calls is not an array")
    calls: list[dict[str, str]] = []
    for call in raw:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise Malformed("a tool call has no function name")
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            # Some compatible servers send the arguments as an object.
            arguments = msgspec.json.encode(arguments).decode()
        call_id = call.get("id")
        calls.append(
            {
                "id": call_id if isinstance(call_id, str) else "",
                "name": function["name"],
                "arguments": arguments,
            }
        )
    return calls


def from_openai_response(data: Any) -> dict[str, Any]:
    """The neutral response for a decoded chat-completions body; ``Malformed`` if the
    body does not have that shape."""
    if not isinstance(data, dict):
        raise Malformed("the body is not an object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise Malformed("the body has no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise Malformed("the first choice has no message")
    content = message.get("content")
    if isinstance(content, list):
        # Content parts: keep the text, which is what a neutral response carries.
        content = "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    if content is not None and not isinstance(content, str):
        raise Malformed("the message content is not a string")
    finish = choices[0].get("finish_reason")
    usage = data.get("usage")
    return {
        "content": content,
        "tool_calls": _tool_calls(message.get("tool_calls")),
        "finish_reason": finish if isinstance(finish, str) else None,
        "usage": usage if isinstance(usage, dict) else None,
    }


class OpenAIAdapter(HTTPAdapter):
    """OpenAI-compatible chat completions (sync and async).

    Built from the manifest's adapter table: ``model`` (required), ``base_url``,
    ``api_key_env``, ``timeout``, ``connect_timeout``, ``max_retries``,
    ``retry_backoff``, ``retry_max_wait``, ``headers`` (see docs/manifest.md).
    """

    name = "openai"
    _shape = "a chat completion"

    def __init__(self, config: Mapping[str, Any]) -> None:
        cfg = HTTPConfig(
            config, name=self.name, default_base_url=DEFAULT_BASE_URL, path="/chat/completions"
        )
        headers = dict(cfg.headers)
        if cfg.api_key is not None:
            headers["Authorization"] = f"Bearer {cfg.api_key}"
        super().__init__(cfg, headers)

    def body(self, request: dict[str, Any]) -> dict[str, Any]:
        return to_openai_body(request, self.model)

    def parse(self, data: Any) -> dict[str, Any]:
        return from_openai_response(data)
