"""Record mode: replay what the fixture holds, ask the live model for the rest, keep it.

::

    provider.py    ``RecordingProvider``: answers, records, counts, compacts (runs in the caller)
    committer.py   group commit: one writer thread, many answers per write and per sync
    journal.py     ``FIXTURE.journal``: the shared append-only journal, anchors, recovery
    ledger.py      the fixture plus its journal, counted: each answer checked in constant time
    compaction.py  the journal folded into the fixture, replaced atomically

Its durable writes and the ``.lock`` (exclusive for ``replay-actor add``, shared by the
recorders of one fixture) are ``files/durable.py``, shared with ``replay-actor add``.
"""
