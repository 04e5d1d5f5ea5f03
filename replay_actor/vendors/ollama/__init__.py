"""The Ollama family: its native API <-> the neutral requests and responses
(docs/ollama.md).

Three shapes, each a module of the shape's functions and routes (its registry name in
``FAMILY``)::

    _wire.py     what the three share: options -> params, ``format`` -> response_format,
                 NDJSON lines, the usage counts, the error envelope, the live endpoint
    chat.py      POST /api/chat      (chat; NDJSON stream by default)  ``ollama``
    generate.py  POST /api/generate  (kind completion; NDJSON stream)  ``ollama-generate``
    embed.py     POST /api/embed     (kind embedding)                  ``ollama-embed``

Ollama streams by default: a body without ``stream: false`` is answered as
newline-delimited JSON (``application/x-ndjson``), each line a partial answer and the
last one ``done: true`` with the counts. The ``ollama`` live adapter asks
``stream: false`` and records the whole answer; completions and embeddings go through
the same adapter (its endpoint's ``kinds``).
"""

from __future__ import annotations

from typing import Final

from .._family import Family, Variables

__all__ = ["FAMILY"]

FAMILY: Final = Family(
    name="ollama",
    shapes=(
        ("ollama", "chat"),
        ("ollama-generate", "generate"),
        ("ollama-embed", "embed"),
    ),
    # Ollama's cloud; a local server is any host (127.0.0.1:11434 by default).
    hosts=("ollama.com",),
    # /api/ is many servers' prefix: asked after every family's headers.
    loose_paths=r"^/api/",
    variables=Variables(
        # ollama (Python and JS) posts {host}/api/chat.
        base_urls=(("OLLAMA_HOST", ""),),
        # ollama (Python) sends it as a bearer token.
        keys=("OLLAMA_API_KEY",),
    ),
    clients=("ollama_client", "async_ollama_client"),
)
