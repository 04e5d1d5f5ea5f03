"""Integrations: where replay-actor meets the code people already have: the SDK glue.

HTTP transports and vendor SDK clients (docs/sdk.md), which serve through the serving
room (``replay_actor.serving``: one HTTP exchange, route, read, ask the provider once,
answer; the front door's too); the Inspect AI model provider (docs/inspect.md), the
pydantic-ai model (docs/pydantic-ai.md) and the pytest plugin (docs/pytest.md). Each
imports its framework lazily, at its own import (the core never needs it), and takes any
provider from ``open_provider``, so replay, live and record all reach it unchanged.
Frameworks find theirs through their own entry points (``inspect_ai``, ``pytest11``) or
an explicit import (``replay_actor.pydantic_ai``).

::

    transport.py        httpx2 transports answered by a provider
    httpx_transport.py  the same for frameworks on httpx
    sdk.py              the vendors' SDK clients, answered from a manifest
    inspect_ai.py       Inspect AI's ``replay`` model provider
    inspect_eval.py     Inspect's own eval logs, read for ``compare --eval``
    pydantic_ai.py      ``ReplayModel``, a pydantic-ai ``Model``
    pytest_plugin.py    the pytest fixtures, marker and ``--replay-mode``
    _private.py         private mode's "raise afresh, no locals", for every integration
"""
