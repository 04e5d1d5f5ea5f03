"""OpenAI Responses API <-> the neutral request and response (docs/responses.md).

This package is the one place the Responses API's shapes (``POST .../responses``) are
read or written, in the directions of the :class:`~replay_actor.vendors.Vendor`
contract::

    request.py  a request body -> the neutral request (read_body): input items become
                chat-like messages, so a conversation hashes alike through chat
                completions and through Responses
    answer.py   the neutral response -> a response object, or its server-sent events
                response.created ... response.completed
    live.py     the neutral request -> a live body (to_body), the live answer -> the
                neutral response (from_response), and where the adapter sends it
    _fields.py  the API's name, derived-id digests, what an error may repeat

and :func:`remembering` here, which makes the shape with a memory of what it served.

Multi-turn state: the API lets a request name an earlier answer (``previous_response_id``)
instead of resending the conversation. A shape :func:`remembering` makes remembers, per
response id it served, the conversation that answer ended (in memory, bounded by
:data:`TRANSCRIPTS`, least recently used first out) and expands the id from there; an id
it never served (or has forgotten) is a ``RequestError`` naming it. One shape is made
per serving provider (``vendors.make_vendor``), so the memory is that provider's.

Ids: the response id is ``resp_`` + 24 hex characters of a sha256 over the neutral
response, the number of messages it answered and an occurrence number that tells apart
different conversations that ended in the same answer (docs/responses.md, "Ids");
item ids (``msg_``, ``fc_``) derive from the response id and the item's position. No id
is derived from the request or its hash, so nothing private crosses in an id.

An id is never given to two conversations in the shape's life: the occurrence numbers
issued per answer are counted, not looked up among the remembered transcripts (which
forget), and an id whose transcript was forgotten is remembered as retired, so asking
for it is a ``RequestError`` saying it aged out. Both cost a few dozen bytes per
distinct answer served, against a transcript's kilobytes.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from typing import Any, Final

import msgspec

from ...._canonical import canonical_json
from ...._errors import RequestError
from ...._response import Response
from ..._common import VendorCall, error_envelope, identifier
from ..._shape import Shape
from ._fields import NAME, digest
from .answer import events, output_items, response_object
from .live import LIVE, from_response, to_body
from .request import ResponsesCall, read_body, read_items

__all__ = [
    "LIVE",
    "NAME",
    "TRANSCRIPTS",
    "ResponsesCall",
    "from_response",
    "remembering",
    "to_body",
]

#: How many served responses one shape remembers for ``previous_response_id``
#: (least recently used forgotten first).
TRANSCRIPTS: Final = 2048


class _Served(msgspec.Struct):
    """What one served response id stands for."""

    request: dict[str, Any]
    response: Response
    #: The neutral conversation it ended (input without instructions + the answer).
    conversation: list[dict[str, Any]]


class _Memory:
    """The responses one shape served, for ``previous_response_id``, and its answers
    that remember them. Thread-safe: a sync transport may be shared by threads."""

    def __init__(self, capacity: int = TRANSCRIPTS) -> None:
        self._served: OrderedDict[str, _Served] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()
        #: Per answer (its seed's first 128 bits), how many occurrence numbers were
        #: issued: the next conversation ending in it gets the next one, never a reused
        #: one, even after the earlier transcripts were forgotten.
        self._issued: dict[str, int] = {}
        #: Ids whose transcripts were forgotten (least recently used first out).
        self._retired: set[str] = set()

    def read_body(self, body: Any, path: str = "") -> VendorCall:
        """The neutral request and call options for a Responses request body.

        Raises ``RequestError`` naming the field for a body replay cannot stand in for
        (built-in tools, server-side conversations, an unknown ``previous_response_id``).
        """
        return read_body(body, self._recall)

    def _recall(self, previous_id: Any) -> dict[str, Any]:
        if type(previous_id) is not str:
            raise RequestError("previous_response_id must be a string")
        with self._lock:
            served = self._served.get(previous_id)
            if served is not None:
                self._served.move_to_end(previous_id)
        if served is None and previous_id in self._retired:
            raise RequestError(
                f"previous_response_id {identifier(previous_id)} was served by this replay "
                f"provider but has aged out of its memory of the last {self._capacity} "
                "responses; send the whole conversation as input"
            )
        if served is None:
            raise RequestError(
                f"previous_response_id {identifier(previous_id)} was not served by this "
                "replay provider (or is no longer remembered); send the whole conversation "
                "as input"
            )
        return {"conversation": served.conversation}

    def _serve(self, response: Response, call: VendorCall) -> tuple[str, list[dict[str, Any]]]:
        """The response id and output items for ``response`` answering ``call``,
        remembered for a later ``previous_response_id``."""
        lead = call.lead if isinstance(call, ResponsesCall) else 0
        # The answer and its position in the conversation; never the request itself. A
        # conversation continued by previous_response_id expands to the same messages
        # as one resent whole, so both get the same ids.
        position = len(call.request["messages"])
        seed = hashlib.sha256(
            canonical_json({"position": position, "response": msgspec.to_builtins(response)})
        ).hexdigest()
        with self._lock:
            rid = self._known_id(seed, call.request, response)
            if rid is not None:
                self._served.move_to_end(rid)
                return rid, output_items(response, rid)
            issued = self._issued.get(seed[:32], 0)
            self._issued[seed[:32]] = issued + 1
            rid = f"resp_{digest(f'{seed}:{issued}')}"
            output = output_items(response, rid)
            conversation = [*call.request["messages"][lead:], *read_items(output, "output")]
            self._served[rid] = _Served(call.request, response, conversation)
            while len(self._served) > self._capacity:
                forgotten, _ = self._served.popitem(last=False)
                self._retired.add(forgotten)
        return rid, output

    def _known_id(self, seed: str, request: dict[str, Any], response: Response) -> str | None:
        """The id already serving this very conversation and answer, if it is still
        remembered (serving it again gives back its id); under the lock."""
        for occurrence in range(self._issued.get(seed[:32], 0)):
            rid = f"resp_{digest(f'{seed}:{occurrence}')}"
            known = self._served.get(rid)
            if known is not None and known.request == request and known.response == response:
                return rid
        return None

    def response_body(self, response: Response, call: VendorCall) -> dict[str, Any]:
        rid, output = self._serve(response, call)
        return response_object(response, call, rid, output)

    def stream_body(self, response: Response, call: VendorCall) -> bytes:
        rid, output = self._serve(response, call)
        return events(response_object(response, call, rid, output))


def remembering(capacity: int = TRANSCRIPTS) -> Shape:
    """The Responses API's shape, ``POST …/responses``, with a memory of its own of the
    last ``capacity`` responses it served (one shape per serving provider)."""
    memory = _Memory(capacity)
    return Shape(
        name=NAME,
        routes=(re.compile(r"/responses/?$"),),
        paths=("POST /v1/responses",),
        live=LIVE,
        read_body=memory.read_body,
        response_body=memory.response_body,
        stream_body=memory.stream_body,
        error_body=error_envelope,
        to_body=to_body,
        from_response=from_response,
        # Its answers say token log probabilities (``top_logprobs``, in output text parts).
        keeps_logprobs=True,
    )
