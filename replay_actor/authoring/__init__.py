"""Authoring tools around a fixture: why a request missed, and how to fix the fixture.

- ``nearest``: the diff and the ranking: the nearest recorded request to one that
  missed, and every JSON path where the two differ;
- ``explain``: the miss policy: what a miss's ``nearest`` is, in normal and in private
  mode, and the caps that keep a miss cheap;
- ``present``: ``replay-actor explain``'s text report and JSON;
- ``add``: add a response to a fixture, append one to an entry (a sequence), replace
  an entry or remove it, atomically and under the fixture's lock;
- ``coverage``: over runs' inspection records, entries never used, sequences never
  fully consumed, and misses.

The request sidecar they read is ``files/sidecar.py`` (record mode writes it too).
Nothing here runs on the replay hit path; ``explain_miss`` runs on the caller's side,
only after a miss.
"""
