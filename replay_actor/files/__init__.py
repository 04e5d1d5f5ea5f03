"""Files both record mode and the authoring tools write, below both (docs/architecture.md,
"Layers").

- ``durable``: atomic replacement, fsync, append-all and the fixture's exclusive lock;
- ``sidecar``: the request sidecar ``<fixture>.requests.jsonl``, read and written line by
  line (the request behind each recorded hash).

Runs in: the caller. Nothing here knows what a miss, a recording or a CLI command is.
"""
