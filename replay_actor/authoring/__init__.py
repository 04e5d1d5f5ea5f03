"""Authoring tools around a fixture: why a request missed, and how to fix the fixture.

- ``sidecar``: the request sidecar ``<fixture>.requests.jsonl``, the normalised request
  behind each recorded hash (never read by the actor, never needed for replay);
- ``explain``: the nearest recorded request to one that missed, and every JSON path
  where the two differ;
- ``add``: add a response to a fixture, or append one to an entry (a sequence),
  atomically and under the fixture's lock;
- ``coverage``: over runs' inspection records, entries never used, sequences never
  fully consumed, and misses.

Nothing here runs on the replay hit path; ``explain_miss`` runs on the caller's side,
only after a miss.
"""
