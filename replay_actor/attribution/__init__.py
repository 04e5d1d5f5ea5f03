"""Attribution (docs/attribution.md): a run log of every call, and ``compare`` of two logs
to say, per sample, where a candidate's calls diverged from the baseline's and why.

    log       the log's line (``LogLine``) and its durable writer (``RunLog``)
              -- runs in the process that owns the provider
    provider  ``LoggedProvider``: any provider, each call logged (the single choke point)
    read      a log read back, bounded: hostile lines refused and counted
    align     calls grouped into samples (scope, else conversation lineage), aligned
    report    the comparison as text, JSON and a self-contained HTML page
              -- read, align and report run in the ``replay-actor compare`` process
"""
