"""The Inspect AI model provider ``replay`` (docs/inspect.md).

Inspect loads this module through the ``inspect_ai`` entry point of replay-actor's
package metadata, which registers the provider, so an eval switches to replay, record or
live from the command line with nothing changed in the task::

    inspect eval task.py --model replay/any-name -M manifest=eval.toml
    inspect eval task.py --model replay/any-name -M fixture=baseline.jsonl -M private=true

Per ``generate`` call::

    Inspect messages, tools, tool_choice, GenerateConfig, sample epoch
        --to_request--> neutral request (+ scope {"epoch": N})
        --await provider.acomplete--> neutral response --to_output--> ModelOutput

The mapping follows the OpenAI chat-completions one of docs/sdk.md, so a conversation
hashes alike whether it reached the model through Inspect or through an SDK client. The
epoch goes into ``scope``: Inspect runs a sample's epochs concurrently, and without it
identical requests would take a sequence's answers in arrival order (docs/authoring.md).
The sample's id and epoch name the call's eval row for the run log (``current_row``,
docs/attribution.md): beside the request, never hashed.

One provider (one acquisition) per ``ModelAPI`` instance; Inspect memoises models, so
that is one per eval process. It is released when Inspect closes the model, and in any
case when the process ends (the cursor actor watches its owner). Every replay-actor
failure is final: ``should_retry`` never asks Inspect to retry one, so a miss fails its
sample with the exact miss message.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, Final

from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    Content,
    ContentImage,
    ContentReasoning,
    ContentText,
    GenerateConfig,
    Logprobs,
    ModelAPI,
    ModelCall,
    ModelOutput,
    ModelUsage,
    StopDetails,
    StopReason,
    modelapi,
)
from inspect_ai.model._cache import epoch as _epoch_var
from inspect_ai.model._call_tools import parse_tool_call
from inspect_ai.tool import ToolCall, ToolChoice, ToolFunction, ToolInfo
from inspect_ai.util._json import json_schema_dump

from .._errors import ManifestError
from .._interface import Provider
from .._response import Unexpressible, read_response
from ..attribution.row import in_row
from ..vendors import canonical_arguments, collapse_content
from ._private import acall_private

__all__ = [
    "ReplayModelAPI",
    "replay",
    "to_output",
    "to_request",
    "current_epoch",
    "current_row",
]

#: GenerateConfig fields that shape the model's answer, with their neutral ``params`` name
#: (the chat-completions body field, as Inspect's OpenAI provider sends them). Every
#: other field (retries, timeouts, connections, caching, batching) is about how Inspect
#: runs, not what it asks, and stays out of the request.
_PARAMS: Final[tuple[tuple[str, str], ...]] = (
    ("max_tokens", "max_tokens"),
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("top_k", "top_k"),
    ("stop_seqs", "stop"),
    ("seed", "seed"),
    ("frequency_penalty", "frequency_penalty"),
    ("presence_penalty", "presence_penalty"),
    ("best_of", "best_of"),
    ("num_choices", "n"),
    ("logprobs", "logprobs"),
    ("top_logprobs", "top_logprobs"),
    ("prompt_logprobs", "prompt_logprobs"),
    ("reasoning_effort", "reasoning_effort"),
    ("reasoning_tokens", "reasoning_tokens"),
    ("verbosity", "verbosity"),
    ("effort", "effort"),
    ("modalities", "modalities"),
)

_STOP_REASONS: Final[dict[str, StopReason]] = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "length": "max_tokens",
    "max_tokens": "max_tokens",
    "tool_calls": "tool_calls",
    "tool_use": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "refusal": "content_filter",
}

_TRUE: Final = frozenset({"true", "1", "yes", "on"})
_FALSE: Final = frozenset({"false", "0", "no", "off", ""})


# -- Inspect -> neutral request ------------------------------------------------------------


def _part(part: Content) -> dict[str, Any]:
    if isinstance(part, ContentText):
        return {"type": "text", "text": part.text}
    if isinstance(part, ContentImage):
        return {"type": "image_url", "image_url": {"url": part.image, "detail": part.detail}}
    if isinstance(part, ContentReasoning):
        reasoning: dict[str, Any] = {"type": "reasoning", "reasoning": part.reasoning}
        if part.summary is not None:
            reasoning["summary"] = part.summary
        if part.signature is not None:
            reasoning["signature"] = part.signature
        if part.redacted:
            reasoning["redacted"] = True
        return reasoning
    # Audio, video, documents, data, server-side tool use: kept whole (provider-internal
    # bookkeeping aside), so two different parts never hash alike.
    dumped: dict[str, Any] = part.model_dump(mode="json", exclude_none=True, exclude={"internal"})
    return dumped


def _content(content: str | list[Content]) -> Any:
    if isinstance(content, str):
        return content
    return collapse_content([_part(part) for part in content])


def _tool_call(call: ToolCall) -> dict[str, str]:
    return {
        "id": call.id,
        "name": call.function,
        "arguments": canonical_arguments(json.dumps(call.arguments)),
    }


def _message(message: ChatMessage) -> dict[str, Any]:
    # Only what the model is asked: ids, sources and metadata are Inspect's bookkeeping.
    if isinstance(message, ChatMessageTool):
        content: Any = (
            f"Error: {message.error.message}" if message.error else _content(message.content)
        )
        out: dict[str, Any] = {"role": "tool", "content": content}
        if message.tool_call_id is not None:
            out["tool_call_id"] = message.tool_call_id
        return out
    if isinstance(message, ChatMessageAssistant):
        assistant: dict[str, Any] = {"role": "assistant"}
        content = _content(message.content)
        if content != "" or not message.tool_calls:
            # An empty text beside tool calls is what an SDK sends as null.
            assistant["content"] = content
        if message.tool_calls:
            assistant["tool_calls"] = [_tool_call(call) for call in message.tool_calls]
        return assistant
    role = "system" if isinstance(message, ChatMessageSystem) else "user"
    assert isinstance(message, ChatMessageSystem | ChatMessageUser)
    return {"role": role, "content": _content(message.content)}


def _tool(tool: ToolInfo) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["parameters"] = json_schema_dump(tool.parameters)
    return out


def _tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if isinstance(choice, ToolFunction):
        return {"name": choice.name}
    return "required" if choice == "any" else choice


def _params(config: GenerateConfig, has_tools: bool) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for field, name in _PARAMS:
        value = getattr(config, field)
        if value is not None:
            params[name] = value
    if config.logit_bias is not None:
        params["logit_bias"] = {str(token): bias for token, bias in config.logit_bias.items()}
    if has_tools and config.parallel_tool_calls is not None:
        params["parallel_tool_calls"] = config.parallel_tool_calls
    if config.extra_body:
        # What the OpenAI SDK would merge into the body, so it is part of what is asked.
        params.update(config.extra_body)
    return params


def _response_format(config: GenerateConfig) -> dict[str, Any] | None:
    schema = config.response_schema
    if schema is None:
        return None
    json_schema: dict[str, Any] = {
        "name": schema.name,
        "schema": json_schema_dump(schema.json_schema),
    }
    if schema.description is not None:
        json_schema["description"] = schema.description
    if schema.strict is not None:
        json_schema["strict"] = schema.strict
    return {"type": "json_schema", "json_schema": json_schema}


def current_epoch() -> int | None:
    """The epoch of the sample this generate call belongs to, or ``None`` outside one."""
    value = _epoch_var.get(None)
    if value is None:
        from inspect_ai.solver._task_state import sample_state

        state = sample_state()
        value = state.epoch if state is not None else None
    return value


def current_row() -> dict[str, Any] | None:
    """The eval row of this generate call: ``{"sample": <id>, "epoch": <n>}`` (the run
    log's ``row``), or None outside a sample."""
    from inspect_ai.solver._task_state import sample_state

    state = sample_state()
    if state is None:
        return None
    return {"sample": state.sample_id, "epoch": state.epoch}


def to_request(
    input: Sequence[ChatMessage],
    tools: Sequence[ToolInfo],
    tool_choice: ToolChoice | None,
    config: GenerateConfig,
    *,
    epoch: int | None = None,
) -> dict[str, Any]:
    """The neutral request for one Inspect ``generate`` call (only fields that are set)."""
    request: dict[str, Any] = {"messages": [_message(message) for message in input]}
    if tools:
        request["tools"] = [_tool(tool) for tool in tools]
        if tool_choice is not None:
            # Inspect passes "none" when there are no tools: not part of the request then.
            request["tool_choice"] = _tool_choice(tool_choice)
    response_format = _response_format(config)
    if response_format is not None:
        request["response_format"] = response_format
    params = _params(config, bool(tools))
    if params:
        request["params"] = params
    if epoch is not None:
        request["scope"] = {"epoch": epoch}
    return request


# -- neutral response -> ModelOutput --------------------------------------------------------


def _usage(raw: Mapping[str, Any] | None) -> ModelUsage | None:
    if raw is None:
        return None

    def count(*names: str) -> int:
        for name in names:
            value = raw.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return 0

    input_tokens = count("prompt_tokens", "input_tokens")
    output_tokens = count("completion_tokens", "output_tokens")
    total = count("total_tokens") or input_tokens + output_tokens
    return ModelUsage(input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=total)


def to_output(response: Mapping[str, Any], model: str, tools: Sequence[ToolInfo]) -> ModelOutput:
    """The ``ModelOutput`` for a neutral response (``read_response``: every key optional,
    as fixtures are written by hand; a value of the wrong type raises ``Unexpressible``).

    A refusal is the answer's text marked ``refusal=True``, with ``stop_reason``
    ``"content_filter"`` and ``stop_details`` of type ``"refusal"`` (docs/inspect.md).
    """
    neutral = read_response(response)
    calls = [
        parse_tool_call(call.id, call.name, call.arguments, list(tools))
        for call in neutral.tool_calls
    ]
    content: str | list[Content] = neutral.content or ""
    stop_reason: StopReason
    stop_details: StopDetails | None = None
    if neutral.refusal is not None:
        # What Inspect's own providers give for a refusal, whichever vendor refused.
        content = [ContentText(text=neutral.refusal, refusal=True)]
        stop_reason = "content_filter"
        stop_details = StopDetails(type="refusal", explanation=neutral.refusal)
    elif neutral.finish_reason is not None:
        stop_reason = _STOP_REASONS.get(neutral.finish_reason, "unknown")
    else:
        stop_reason = "tool_calls" if calls else "stop"
    message = ChatMessageAssistant(
        content=content, tool_calls=calls or None, model=model, source="generate"
    )
    choice = ChatCompletionChoice(
        message=message,
        stop_reason=stop_reason,
        stop_details=stop_details,
        logprobs=_logprobs(neutral.logprobs),
    )
    return ModelOutput(model=model, choices=[choice], usage=_usage(neutral.usage))


def _logprobs(logprobs: dict[str, Any] | None) -> Logprobs | None:
    """Inspect's ``Logprobs`` for the neutral ones (OpenAI chat's token form, which
    Inspect's is), so a ``logprobs`` generate config replays what it recorded."""
    if logprobs is None or not isinstance(logprobs.get("content"), list):
        return None
    try:
        return Logprobs.model_validate({"content": logprobs["content"]})
    except ValueError:  # pydantic's ValidationError is one
        raise Unexpressible("the stored logprobs are not token log probabilities") from None


# -- the provider -----------------------------------------------------------------------------


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ManifestError(f"model arg {name} must be true or false", key=name)


class ReplayModelAPI(ModelAPI):
    """An Inspect ``ModelAPI`` answering from a replay-actor provider.

    Model args (``-M`` on the command line, ``model_args`` in Python): exactly one of
    ``manifest`` (a manifest of any kind) or ``fixture`` (a fixture, replayed); with
    ``fixture``, optionally ``private`` and ``inspection`` (docs/privacy.md) and
    ``timeout`` (seconds).
    """

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig = GenerateConfig(),  # noqa: B008 (Inspect's own signature)
        **model_args: Any,
    ) -> None:
        super().__init__(model_name, base_url, api_key, [], config)
        self._provider = _open(model_args)
        try:
            self._kind: str = self._provider.snapshot()["kind"]
        except BaseException:
            self._provider.release()
            raise

    @property
    def provider(self) -> Provider:
        """The replay-actor provider behind this model (``snapshot()``, ``inspect()``)."""
        return self._provider

    async def generate(
        self,
        input: list[ChatMessage],
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> tuple[ModelOutput, ModelCall]:
        request = to_request(input, tools, tool_choice, config, epoch=current_epoch())
        # Private mode: a miss is raised afresh, so the provider's frames (whose locals
        # hold the request hash) never reach Inspect's traceback, which shows every
        # frame's locals with INSPECT_TRACEBACK_LOCALS=1.
        with in_row(current_row()):
            response = await acall_private(lambda: self._provider.acomplete(request))
        output = to_output(response, self.model_name, tools)
        return output, ModelCall.create(request=request, response=response)

    def should_retry(self, ex: Exception) -> bool:
        # A miss, an exhausted sequence or a rejected request gives the same answer every
        # time; the live adapter already retried what was worth retrying.
        return False

    def max_connections(self) -> int:
        # Replay answers locally, so concurrency is not a rate limit there; a live or
        # record manifest reaches a real endpoint and keeps Inspect's default. Inspect's
        # --max-connections overrides both.
        return 64 if self._kind == "replay" else super().max_connections()

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        """Release the provider (idempotent)."""
        self._provider.release()


def _open(model_args: dict[str, Any]) -> Provider:
    """The provider the model args describe; ``ManifestError`` naming a wrong arg."""
    args = dict(model_args)
    manifest = args.pop("manifest", None)
    fixture = args.pop("fixture", None)
    if (manifest is None) == (fixture is None):
        raise ManifestError(
            "the replay model needs exactly one of -M manifest=PATH or -M fixture=PATH",
            key="manifest",
        )
    if manifest is not None:
        if args:
            unknown = sorted(args)[0]
            raise ManifestError(
                f"unknown model arg {unknown} (with a manifest, set it there)", key=unknown
            )
        from ..manifest import open_provider

        # A path (the command line's), or a mapping or Manifest given in Python.
        return open_provider(manifest)
    options: dict[str, Any] = {}
    if "private" in args:
        options["private"] = _flag("private", args.pop("private"))
    if "inspection" in args:
        options["inspection_path"] = os.fspath(args.pop("inspection"))
    if "timeout" in args:
        timeout = args.pop("timeout")
        if type(timeout) not in (int, float) or not 0 < timeout < float("inf"):
            raise ManifestError("model arg timeout must be a positive number", key="timeout")
        options["timeout"] = float(timeout)
    if args:
        unknown = sorted(args)[0]
        raise ManifestError(f"unknown model arg {unknown}", key=unknown)
    from .._replay import acquire

    return acquire(os.fspath(fixture), **options)


@modelapi(name="replay")
def replay() -> type[ModelAPI]:
    """Inspect's registry entry: ``--model replay/<any name>``."""
    return ReplayModelAPI
