"""``ReplayModel``: a pydantic-ai ``Model`` answered by a replay-actor provider
(docs/pydantic-ai.md).

::

    from replay_actor.pydantic_ai import ReplayModel

    with ReplayModel("eval.toml") as model:         # replay, record or live, per the manifest
        with agent.override(model=model):
            result = agent.run_sync("What is the weather in Paris?")

Per request::

    pydantic-ai messages, tool definitions, settings, output mode
        --to_request--> neutral request --await provider.acomplete--> neutral response
        --to_response--> ModelResponse (or the same parts as a stream)

The mapping is the one pydantic-ai's OpenAI chat model sends, read back as docs/sdk.md
maps an OpenAI body: instructions become system messages after the leading ones,
tool returns become ``tool`` messages, tool calls keep their ids with RFC 8785
arguments, ``max_tokens``, ``temperature``, ``stop_sequences`` (as ``stop``) and the other
generation settings go into ``params``. So an agent run through this model and through an
OpenAI client replaying the same fixture ask the same requests.

One provider per ``ReplayModel``, opened when it is built and released by ``close()``
(or the ``with`` block). The model has no retries of its own: a miss raises
``ReplayMiss`` out of the agent run.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any, Final

from pydantic_ai import _utils
from pydantic_ai._run_context import RunContext
from pydantic_ai.messages import (
    BinaryContent,
    FinishReason,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    ModelResponseStreamEvent,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import (
    Model,
    ModelRequestParameters,
    StreamedResponse,
    _sendable_request_parts,
)
from pydantic_ai.models._tool_choice import resolve_tool_choice
from pydantic_ai.profiles import ModelProfile, ModelProfileSpec
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import RequestUsage

from .._errors import RequestError
from .._interface import Provider
from .._response import Response, read_response
from ..vendors import canonical_arguments, collapse_content
from ._private import acall_private

__all__ = ["ReplayModel", "ReplayStreamedResponse", "to_response"]

#: ModelSettings keys that shape the answer, with their neutral ``params`` name (the
#: chat-completions body field pydantic-ai's OpenAI model sends them as). ``timeout``,
#: ``extra_headers`` and the like are about transport, not about what is asked.
_PARAMS: Final[tuple[tuple[str, str], ...]] = (
    ("max_tokens", "max_tokens"),
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("seed", "seed"),
    ("stop_sequences", "stop"),
    ("presence_penalty", "presence_penalty"),
    ("frequency_penalty", "frequency_penalty"),
    ("logit_bias", "logit_bias"),
)

_FINISH: Final[dict[str, FinishReason]] = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_calls": "tool_call",
    "tool_use": "tool_call",
    "function_call": "tool_call",
    "content_filter": "content_filter",
}


# -- pydantic-ai -> neutral request ------------------------------------------------------------


def _user_item(item: Any) -> dict[str, Any]:
    if isinstance(item, str):
        return {"type": "text", "text": item}
    if isinstance(item, ImageUrl):
        return {"type": "image_url", "image_url": {"url": item.url}}
    if isinstance(item, BinaryContent) and item.is_image:
        data = base64.b64encode(item.data).decode()
        return {"type": "image_url", "image_url": {"url": f"data:{item.media_type};base64,{data}"}}
    raise RequestError(f"a {type(item).__name__} in a user prompt cannot be replayed")


def _user(part: UserPromptPart) -> dict[str, Any]:
    if isinstance(part.content, str):
        return {"role": "user", "content": part.content}
    return {"role": "user", "content": collapse_content([_user_item(i) for i in part.content])}


def _request_messages(message: ModelRequest) -> Iterator[dict[str, Any]]:
    files: list[Any] = []
    for part in _sendable_request_parts(message.parts):
        if isinstance(part, SystemPromptPart):
            yield {"role": "system", "content": part.content}
        elif isinstance(part, UserPromptPart):
            yield _user(part)
        elif isinstance(part, ToolReturnPart):
            text, extra = part.model_response_str_and_user_content()
            files.extend(extra)
            yield {"role": "tool", "tool_call_id": part.tool_call_id, "content": text}
        else:
            # Instruction deltas, settings deltas, speech: Agent renders them through
            # prepare_messages before a model sees them; anything left cannot be hashed
            # faithfully, so it is refused rather than dropped.
            raise RequestError(f"a {type(part).__name__} cannot be replayed")
    if files:
        yield _user(UserPromptPart(content=files))


def _response_message(message: ModelResponse) -> dict[str, Any] | None:
    texts: list[str] = []
    calls: list[dict[str, str]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            texts.append(part.content)
        elif isinstance(part, ToolCallPart):
            calls.append(
                {
                    "id": part.tool_call_id,
                    "name": part.tool_name,
                    "arguments": canonical_arguments(part.args_as_json_str()),
                }
            )
        elif isinstance(part, ThinkingPart):
            continue  # the chat-completions shape carries no reasoning back
        else:
            raise RequestError(f"a {type(part).__name__} cannot be replayed")
    if not texts and not calls:
        return None
    out: dict[str, Any] = {"role": "assistant"}
    if texts:
        out["content"] = "\n\n".join(texts)
    if calls:
        out["tool_calls"] = calls
    return out


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["parameters"] = tool.parameters_json_schema
    if tool.strict:
        out["strict"] = True  # as pydantic-ai's OpenAI model sends it: only when true
    return out


def _params(settings: ModelSettings, has_tools: bool) -> dict[str, Any]:
    given: Mapping[str, Any] = settings
    params: dict[str, Any] = {}
    for key, name in _PARAMS:
        if given.get(key) is not None:
            params[name] = given[key]
    if has_tools and given.get("parallel_tool_calls") is not None:
        params["parallel_tool_calls"] = given["parallel_tool_calls"]
    extra = given.get("extra_body")
    if isinstance(extra, Mapping):
        params.update(extra)  # merged into the body, as the OpenAI SDK does
    return params


class _Mapper:
    """Builds the neutral request for one model; needs the model for its instructions."""

    def __init__(self, model: ReplayModel) -> None:
        self._model = model

    def request(
        self,
        messages: Sequence[ModelMessage],
        settings: ModelSettings | None,
        parameters: ModelRequestParameters,
    ) -> dict[str, Any]:
        request: dict[str, Any] = {"messages": self._messages(messages, parameters)}
        tools, choice = _offered_tools(settings, parameters)
        if tools:
            request["tools"] = [_tool(tool) for tool in tools.values()]
            request["tool_choice"] = choice
        response_format = _response_format(parameters)
        if response_format is not None:
            request["response_format"] = response_format
        params = _params(settings or {}, bool(tools))
        if params:
            request["params"] = params
        return request

    def _messages(
        self, messages: Sequence[ModelMessage], parameters: ModelRequestParameters
    ) -> list[dict[str, Any]]:
        """The neutral messages, the model's instructions as system messages after the
        leading ones."""
        out: list[dict[str, Any]] = []
        for message in messages:
            if isinstance(message, ModelRequest):
                out.extend(_request_messages(message))
            else:
                mapped = _response_message(message)
                if mapped is not None:
                    out.append(mapped)
        instructions = self._model.instruction_parts(messages, parameters)
        if instructions:
            leading = 0
            while leading < len(out) and out[leading]["role"] == "system":
                leading += 1
            out[leading:leading] = [{"role": "system", "content": i.content} for i in instructions]
        return out


def _offered_tools(
    settings: ModelSettings | None, parameters: ModelRequestParameters
) -> tuple[dict[str, ToolDefinition], Any]:
    """The tools offered to the model (those the tool choice allows) and the neutral
    tool choice."""
    tools = dict(parameters.tool_defs)
    choice: Any = None
    if tools:
        resolved = resolve_tool_choice(settings, parameters)
        if isinstance(resolved, tuple):
            mode, names = resolved
            tools = {name: tool for name, tool in tools.items() if name in names}
            choice = {"name": next(iter(names))} if mode == "required" and len(names) == 1 else mode
        else:
            choice = resolved
    return tools, choice


def _response_format(parameters: ModelRequestParameters) -> dict[str, Any] | None:
    if parameters.output_mode == "native" and parameters.output_object is not None:
        output = parameters.output_object
        schema: dict[str, Any] = {
            "name": output.name or "final_result",
            "schema": output.json_schema,
        }
        if output.description:
            schema["description"] = output.description
        if output.strict is not None:
            schema["strict"] = output.strict
        return {"type": "json_schema", "json_schema": schema}
    if parameters.output_mode == "prompted":
        return {"type": "json_object"}
    return None


# -- neutral response -> pydantic-ai ------------------------------------------------------------


def _usage(raw: Mapping[str, Any] | None) -> RequestUsage:
    if raw is None:
        return RequestUsage()

    def count(*names: str) -> int:
        for name in names:
            value = raw.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return 0

    return RequestUsage(
        input_tokens=count("prompt_tokens", "input_tokens"),
        output_tokens=count("completion_tokens", "output_tokens"),
    )


def _parts(response: Response) -> list[ModelResponsePart]:
    if response.refusal is not None:
        # As pydantic-ai's OpenAI model answers a refusal: no parts, the text in
        # provider_details (see _details), so the agent raises ContentFilterError.
        return []
    parts: list[ModelResponsePart] = []
    if response.content:
        parts.append(TextPart(content=response.content))
    for call in response.tool_calls:
        parts.append(ToolCallPart(tool_name=call.name, args=call.arguments, tool_call_id=call.id))
    return parts


def _finish(response: Response, parts: list[ModelResponsePart]) -> FinishReason:
    if response.refusal is not None:
        return "content_filter"
    finish = response.finish_reason
    if finish is not None and finish in _FINISH:
        return _FINISH[finish]
    return "tool_call" if any(isinstance(p, ToolCallPart) for p in parts) else "stop"


def _details(response: Response) -> dict[str, Any] | None:
    return None if response.refusal is None else {"refusal": response.refusal}


def to_response(answer: Mapping[str, Any], model_name: str) -> ModelResponse:
    """The ``ModelResponse`` for a neutral response (``read_response``: every key
    optional; a value of the wrong type raises ``Unexpressible``). A refusal has no
    parts, ``finish_reason="content_filter"`` and its text in
    ``provider_details["refusal"]`` (docs/pydantic-ai.md)."""
    neutral = read_response(answer)
    parts = _parts(neutral)
    return ModelResponse(
        parts=parts,
        usage=_usage(neutral.usage),
        model_name=model_name,
        provider_name="replay",
        provider_details=_details(neutral),
        finish_reason=_finish(neutral, parts),
    )


# -- the model ------------------------------------------------------------------------------------


class ReplayModel(Model):
    """A pydantic-ai ``Model`` whose answers come from the manifest's provider.

    ``manifest`` is a manifest path, mapping or ``Manifest`` (any kind: replay, record, live);
    ``model_name`` is what responses report (it is not part of any request).
    """

    def __init__(
        self,
        manifest: Any,
        *,
        model_name: str = "replay",
        settings: ModelSettings | None = None,
        profile: ModelProfileSpec | None = None,
    ) -> None:
        from ..manifest import open_provider

        if profile is None:
            profile = ModelProfile(
                supports_json_schema_output=True, supports_json_object_output=True
            )
        super().__init__(settings=settings, profile=profile)
        self._model_name = model_name
        self._mapper = _Mapper(self)
        # Not ``_provider``: pydantic-ai's Model keeps its own (HTTP) provider there.
        self._replay = open_provider(manifest)

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def system(self) -> str:
        return "replay"

    @property
    def replay_provider(self) -> Provider:
        """The replay-actor provider behind this model (``snapshot()``, ``inspect()``)."""
        return self._replay

    def instruction_parts(
        self, messages: Sequence[ModelMessage], parameters: ModelRequestParameters
    ) -> list[Any]:
        return self._get_instruction_parts(messages, parameters) or []

    def to_request(
        self,
        messages: Sequence[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> dict[str, Any]:
        """The neutral request this model asks for (after ``prepare_request``)."""
        return self._mapper.request(messages, model_settings, model_request_parameters)

    async def _answer(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> tuple[ModelResponse, ModelRequestParameters]:
        settings, parameters = self.prepare_request(model_settings, model_request_parameters)
        request = self.to_request(messages, settings, parameters)
        # Private mode: a miss is raised afresh, so the provider's frames (whose locals
        # hold the request hash) stay out of any traceback recorded with locals.
        answer: dict[str, Any] = await acall_private(lambda: self._replay.acomplete(request))
        response = to_response(answer, self._model_name)
        return response, parameters

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        response, _ = await self._answer(messages, model_settings, model_request_parameters)
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncGenerator[StreamedResponse]:
        # A streamed and an unstreamed call ask the same request, so they share an entry.
        response, parameters = await self._answer(
            messages, model_settings, model_request_parameters
        )
        yield ReplayStreamedResponse(
            model_request_parameters=parameters, _model_name=self._model_name, _response=response
        )

    def close(self) -> None:
        """Release the provider (idempotent)."""
        self._replay.release()

    def __enter__(self) -> ReplayModel:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ReplayModel({self._model_name!r}, {self._replay!r})"


@dataclass
class ReplayStreamedResponse(StreamedResponse):
    """The answer as a stream: the text, then each tool call, as pydantic-ai events."""

    _model_name: str
    _response: ModelResponse
    _timestamp: datetime = field(default_factory=_utils.now_utc, init=False)

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:
        self._usage = self._response.usage
        self.finish_reason = self._response.finish_reason
        self.provider_details = self._response.provider_details
        for index, part in enumerate(self._response.parts):
            if isinstance(part, TextPart):
                for event in self._parts_manager.handle_text_delta(
                    vendor_part_id=index, content=part.content
                ):
                    yield event
            elif isinstance(part, ToolCallPart):
                yield self._parts_manager.handle_tool_call_part(
                    vendor_part_id=index,
                    tool_name=part.tool_name,
                    args=part.args_as_json_str(),
                    tool_call_id=part.tool_call_id,
                )

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def provider_name(self) -> str:
        return "replay"

    @property
    def provider_url(self) -> str | None:
        return None

    @property
    def timestamp(self) -> datetime:
        return self._timestamp
