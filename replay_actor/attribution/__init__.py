"""Attribution (docs/attribution.md): a run log of every call, and ``compare`` of two logs
to say, per sample, where a candidate's calls diverged from the baseline's and why.

    log       the log's line (``LogLine``) and its durable writer (``RunLog``)
              -- runs in the process that owns the provider
    row       the eval row a call belongs to: named by the integration, beside the request
    provider  ``LoggedProvider``: any provider, each call logged (the single choke point)
    read      a log read back, bounded: hostile lines refused and counted
    requests  the requests behind both logs' hashes, from either log's request sidecar
    samples   calls grouped into samples (eval row, conversation lineage, a scope's bag),
              retries as attempts of one call
    evals     an eval framework's own samples (``--eval``) matched to the log's calls
    pairing   baseline and candidate samples paired by content, never by order
    align     each pair walked to the first call where it parts
    report    the comparison as text, JSON and a self-contained HTML page
              -- read to report run in the ``replay-actor compare`` process
"""
