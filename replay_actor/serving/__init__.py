"""Serving: the HTTP exchange, the same wherever replay-actor answers a vendor API, in
process (the httpx2 and httpx transports of ``integrations/``, which its SDK clients
use) and over local HTTP (``frontdoor/``). This module is its one
public face: its callers import from here, never from a module of it.

Runs in: whichever process serves (a transport's caller, or the front door).

One HTTP request in, one provider call, one HTTP answer out::

    Exchange.prepare(method, path, body, headers)
      _routes.canonical_path (Azure, /messages) -> route by path
      -> the vendor shape's read_body -> x-replay-scope  -> Call | Answer
    Serving.serve / AsyncServing.serve: provider.complete / acomplete, exactly once
      -> Call.answer(response) | Call.fail(exc): the shape's response_body / stream_body
    Answer(status, headers, body): what goes back, failures included

Every failure is an HTTP error the vendors' SDKs raise as their own exception and never
retry: each carries ``x-should-retry: false`` (both SDKs obey it before their status-code
rules), and no exception ever leaves the transport (an exception would be a connection
error, which the SDKs retry, asking the provider again). Nothing is forwarded anywhere.

=========================  ======  =====================
failure                    status  ``error.type``
=========================  ======  =====================
other path or method       404     ``not_found`` (listing the served paths)
invalid request            400     ``invalid_request``
miss                       404     ``replay_miss``
exhausted sequence         404     ``replay_exhausted``
released provider / lost   503     ``replay_unavailable``
live endpoint failed       502     ``live_provider_error``
=========================  ======  =====================

The error message is the exception's own first line (for a miss, exactly the message
docs/privacy.md gives): in private mode it carries no hash, and no header or id is
derived from the request hash, so nothing private crosses. In normal mode a miss that
the fixture's request sidecar explains adds ``error.nearest`` (``{"request_hash",
"paths"}``, docs/authoring.md) beside the message, so an SDK user can read it from the
exception's ``body``.

The ``x-replay-scope`` header (docs/front-door.md) is read here, for both: from a
transport's headers (a mapping with case-insensitive lookup, as httpx's) or from the
front door's raw ASGI header pairs.

::

    _exchange.py   Exchange: routes and reads a request into a Call (asked once) or an
                   Answer; the x-replay-scope header
    _serving.py    Serving, AsyncServing: the provider asked once per request, the
                   answer counted, the call attributed (the run log), failures reported
    _answer.py     one HTTP answer and the vendors' error envelopes (the lowest part)
    _routes.py     paths before routing: Azure's and /messages spellings, the vendor a
                   path looks like (its 404's envelope), the served paths a 404 lists
    _outcomes.py   what a serving answered, counted by kind (replay-actor run's summary)
    batches/       OpenAI Files + Batches, Anthropic Message Batches: each line one call
                   through Exchange.prepare, complete at once (docs/batches.md)
"""

from __future__ import annotations

from ._answer import Answer, Headers, error_answer
from ._exchange import API_NAMES, SCOPE_HEADER, Api, Call, Exchange
from ._outcomes import KINDS, Kind, Outcomes
from ._serving import AsyncServing, FailureHook, Serving, outcome_of

__all__ = [
    "API_NAMES",
    "KINDS",
    "SCOPE_HEADER",
    "Answer",
    "Api",
    "AsyncServing",
    "Call",
    "Exchange",
    "FailureHook",
    "Headers",
    "Kind",
    "Outcomes",
    "Serving",
    "error_answer",
    "outcome_of",
]
