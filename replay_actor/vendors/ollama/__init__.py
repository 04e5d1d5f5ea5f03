"""Ollama's native API <-> the neutral requests and responses (docs/ollama.md).

Three shapes, each a :class:`~replay_actor.vendors.Shape` with its registry line::

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
