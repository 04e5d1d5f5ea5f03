"""replay-actor's benchmarks: ``python -m benchmarks`` or ``make bench``.

The targets and the last full run's results are in docs/benchmarks.md.

Every target is a ratio taken within one run, in ``--runs`` runs (the median run is
shown with the lowest and highest), idle and with ``--hog``: ours and its reference are
measured interleaved (rotating order, after a warm-up, several repetitions), so the
noise of a shared machine lands on both sides. Modules, one concern each:

- ``timing``    -- interleaved repetitions, medians and spread, the result rows
- ``workload``  -- the realistic request, cached fixtures and VCR.py cassettes
- ``procs``     -- the bare reference children (echo, no-op, owner) and their reaping
- ``calls``     -- P1, P2 (and the size series), P4, P8
- ``vcr_peer``  -- P3, VCR.py playback in a child process under a time budget
- ``minizygote`` -- P5's strict reference: a no-op child forked from a warm process
- ``lifecycle`` -- P5 acquire -> ready, P7 owner SIGKILL -> actor gone, idle CPU
- ``loading``   -- P6 fixture load throughput
- ``concurrency`` -- P9 threads, processes, asyncio tasks; P10 a pipelined batch
- ``layouts``   -- every fixture layout of the same 100k entries (P6b, P6c)
- ``large``     -- P6b, P6c (the worst layout, its first acquisition), P5d, P8c
- ``frontdoor`` -- P14 the front door, P17 a sealed run's start-up
- ``tools``     -- P21 a frozen tool call through the sealed proxy
- ``load``      -- P20 the front door under load (wrk, 64 AsyncOpenAI tasks), its plot
- ``loadprofile`` -- where a front-door request's CPU goes under P20's load (py-spy)
- ``litellm_peer`` -- P18 the front door vs the LiteLLM proxy's in-memory cache
- ``report``    -- the table, ``results/latest.json``, ``docs/benchmarks.md`` and the plot
"""
