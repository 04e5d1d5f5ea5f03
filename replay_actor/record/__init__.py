"""Record mode: replay what the fixture holds, ask the live model for the rest, keep it.

::

    provider.py  ``RecordingProvider``: answers, records, counts (runs in the caller)
    journal.py   each response durable before the fixture is rewritten; crash recovery
    durable.py   atomic replacement, fsync, and the exclusive ``.lock``
"""
