"""Record mode: replay what the fixture holds, ask the live model for the rest, keep it.

::

    provider.py  ``RecordingProvider``: answers, records, counts (runs in the caller)
    journal.py   each response durable before the fixture is rewritten; crash recovery

Its durable writes and the exclusive ``.lock`` are ``files/durable.py``, shared with
``replay-actor add``.
"""
