"""The prose of docs/benchmarks.md: how each number is taken, and, for a target this
run missed, what limits it (from profiling; shown only when the target is missed)."""

from __future__ import annotations

from typing import Final

__all__ = ["ANALYSIS", "METHOD", "PROFILE"]

METHOD: Final = """\
- **Realistic request**: a system prompt, 20 messages of ~500 characters, 5 tools with
  JSON-schema parameters, `tool_choice` and `params` with a float temperature (0.7):
  ~17 KB canonical. Fixture lines are ~460 bytes (a ~300-byte neutral response), so the
  100k-entry fixture is ~46 MB; the realistic request's entry is the last line.
- **P1/P2/P8**: four acquisitions (100, 1k, 10k, 100k entries) held at once; every round
  times a batch of `complete()` calls on each, a batch of local `request_hash` calls and
  a batch of 100-byte round trips over a `multiprocessing.Pipe` to an echo child started
  by a *spawn* context. A round's floor is its hash time plus its echo time.
- **P1b**: the same rounds also time a batch of raw AF_UNIX socketpair exchanges with a
  child interpreter that answers every read with one write (`RawEcho`): the request
  frame is the very one `complete()` sends for the realistic request (76 bytes) and the
  reply the very frame the actor sends back (~340 bytes). A round's floor is its
  `request_hash` time plus that exchange; the target is ours / floor ≤ 2.0. Where the
  rest of a call's time goes is profiled by `python -m benchmarks.hotpath`.
- **P8**: the 100k actor's RSS (psutil), USS and PSS (`memory_full_info`) and its
  zygote's RSS, after 300 calls, twice: P8a in a fresh worker process that acquires only
  that fixture (its zygote caches nothing else), P8b the P1 run's actor (its zygote also
  caches the 100, 1k and 10k fixtures). The baseline is an interpreter started as the
  zygote is (`python -P -c`, same environment) that has imported
  `replay_actor.replay.forked.zygote`,
  i.e. all the code an actor runs. An actor is a fork of the zygote: its RSS counts every
  page it shares with the zygote copy-on-write (the interpreter and the parsed table),
  so RSS says what the actor can touch, USS what it alone costs (about 2 MB), and PSS
  splits the shared pages between the two.
- **P3**: the cassette (YAML, vcrpy format version 1) is written by the benchmark: N
  POSTs of distinct realistic requests to `http://127.0.0.1:9/v1/chat/completions`, the
  realistic request last. VCR.py (`record_mode="none"`,
  `match_on=["method","uri","body"]`, `allow_playback_repeats=True`) plays it through
  `requests` in a child process, one call per round, interleaved with a batch of
  `complete()` on a fixture of the same size. Each size has a time budget; a size whose
  playback does not fit is stopped and reported as not reached.
- **P4**: `request_hash` vs `sha256(msgspec.json.encode(req, order="sorted"))` (not
  RFC 8785, the speed floor) and vs `sha256(rfc8785.dumps(req))` (the reference). The
  run first asserts `canonical_request(req) == rfc8785.dumps(req)` byte for byte (the
  realistic request is already normalised; also asserted). Batches are short (30 calls,
  ~1 ms; a few `rfc8785` calls) and many (150 rounds), so that another process's time
  slice rarely falls inside one and the medians hold still on a shared machine. P4a/P4b
  hash the same request again and again, as an evaluation sends the same tools and
  parameters with every call, so its configuration is remembered (docs/request.md);
  *P4c* (report only) gives every call a configuration never seen before (a tool
  description that differs per call), against the floor over the very same requests.
  The cyclic collector is off during every batch (as `timeit` does): `rfc8785`
  allocates far more than the others, and a collection (whose cost depends on the whole
  process's heap, so on what ran before) landed on its side and made P4b swing between
  12 and 19 in one afternoon. P4a and P4b are medians of per-round ratios.
- **Runs**: P1, P1b, P2, P8, P4, P6b, P6c, P9 and P18 are measured in 5 whole runs
  (`--runs`, each with its own warm-up and rounds); the row shown is the median run's,
  and the ratio's brackets are the lowest and highest of the runs. The spread says how
  far a single run of that target can be trusted on this shared machine.
- **`--hog`**: the same run with one busy-looping process per core for its whole
  length (no idle core: every wake-up waits for the scheduler instead of a halted
  vCPU). Such a run writes its results to the cache directory, never to these docs.
- **P5**: `acquire()` to ready on a 1k-entry fixture (release not timed; the run's first
  acquisition, which starts the zygote, not timed), interleaved with four references,
  each timed from the socketpair until the child's first bytes arrive on our end.
  *P5a*, the target's "a bare no-op child started the same way" read strictly (an actor is
  a child forked by the warm zygote, so the reference is too): a benchmark-owned
  mini-zygote (`benchmarks/minizygote.py`), started as the zygote is
  (`subprocess.Popen([sys.executable, "-P", "-c", ...])`, same environment, a
  `SOCK_SEQPACKET` control socket), that has imported `replay_actor.replay.forked.zygote` and
  ignores
  SIGCHLD; per request it receives the child's socket over `SCM_RIGHTS`, forks a child
  that writes "OK" on it and `os._exit(0)`s, and replies with the PID, as the zygote
  does. To split the difference, a second mini-zygote holds the parsed 1k-entry
  fixture (parsed by the zygote's own `FixtureCache`) and forks either the same no-op
  child or the real actor (`serve_forked`), timed until its READY frame. *P5b*, the
  old floor (how actors used to be started): a no-op
  `subprocess.Popen([sys.executable, "-c", ...])` with the same environment and a
  passed socket fd, until it writes "OK". P5a/P5b run in a worker process of their own
  (`python -m benchmarks.lifecycle`) whose zygote has only ever acquired the 1k
  fixture; *P5c* repeats P5a in the benchmark's own process, whose zygote was asked for
  the 100k, 10k, 100 and 1k fixtures first (the P1 run's state, set up explicitly), with
  the second mini-zygote warming the same four through the zygote's own cache (which
  keeps only the small ones). The steps are differences of
  medians.
- **P5d, P6b, P6c, P8c** and the large-fixture plot (docs/benchmarks-large.png):
  `benchmarks/large.py` (its docstring is the method). *P6c* is issue 28's target for
  what a user feels of P6b (not in the spec's table): the first acquire -> ready of
  the P6b file when nothing holds it (a fresh zygote each repetition: the holder is
  forked, loads, checks and shares the fixture, then forks the actor), against the
  same raw decode, ≥ 0.35.
- **P18**: `benchmarks/litellm_peer.py` (its docstring is the method): the same openai
  SDK `chat.completions.create` of the realistic request to `replay-actor serve` and to
  the LiteLLM proxy (`litellm --config`, on 127.0.0.1) answering from its in-memory
  cache; its upstream is stopped after the first call, so every timed call is a hit.
  Its config sets `cache_params.max_messages: null`: by default LiteLLM neither looks up
  nor stores a request of more than 4 messages, and the realistic request has 21.
- **P6**: `load_fixture` of the 100k-line file vs reading the file and
  `msgspec.json.decode` of every line, no validation; reading included on both sides.
- **P7**: per kill, a fresh owner process and acquisition; pidfds opened on both while
  alive; SIGKILL to the owner by PID; time until the actor's pidfd reports its exit.
  Idle CPU: `/proc/PID/schedstat` on-CPU nanoseconds of an actor nobody calls, over at
  least 10 s (the kill loop runs meanwhile, on other actors), scaled to 10 s.
- **P9**: threads start on a barrier; worker processes each acquire their own actor and
  are told to go together, and aggregate throughput is all calls over first start to
  last end; P9c runs 64 asyncio tasks on one loop, each calling `acomplete()` in turn
  (one connection, requests in flight), against P10's in-process floor over the same
  requests (`request_hash`, a dict lookup of the stored bytes, `msgspec.json.decode`; no
  actor): target ≥ 0.7 x the floor's throughput. (Turn 5 redefined it: the old "≥ 2 x
  sequential `complete()`" fell below the hash's own cost on one thread once
  `complete()` reached the floor.)
- **P10**: `complete_many()` of 1,000 distinct realistic requests (variants of the last
  message, each its own entry) against the in-process floor over the same requests:
  `request_hash`, a dict lookup of the stored response bytes, `msgspec.json.decode`.
- **P11**: one acquisition of the 1k-entry fixture; the caller times each `complete()`
  of the realistic request; rounds with and without another raw connection that sent a
  request frame's header and half its body, then nothing, interleaved and rotated; the
  target is the difference of the two sides' p99.
- **P12**: `openai_client(replay manifest)` `chat.completions.create(**body)` with the
  realistic request as an OpenAI body (its neutral form hashes as the realistic request;
  asserted), on the 100-entry fixture, vs the floor: the same SDK call on an
  `openai.OpenAI` over `httpx2.MockTransport` returning the same canned `chat.completion`
  JSON, plus one `complete()` of the realistic request on a handle of its own. Both
  answers are asserted equal first. The difference is the transport and the vendor
  mapping (body decode, body -> neutral request, neutral response -> vendor JSON).
- **P12g**: P12 for Gemini's shape: `gemini_client(replay manifest)`
  `models.generate_content(model, contents, config)` with the realistic request as a
  `generateContent` body (asserted to hash as the realistic request), vs the same
  google-genai call on a `genai.Client` whose httpx2 transport is a `MockTransport`
  returning the same canned `GenerateContentResponse`, plus one `complete()`.
- **P13**: a single-node Ray cluster of the benchmark's own (`ray.init(address="local")`,
  2 CPUs, stopped at the end); one Ray task times, interleaved, `complete()` of the
  realistic request on a `replay_actor.ray` handle and a bare Ray actor method
  (`num_cpus=0`) returning the same response bytes; P13b times `complete_many()` of 100
  requests per request (report only). docs/ray.md says what a multi-node cluster adds.
- **P14**: `replay-actor serve` of a replay manifest on the 100-entry fixture, in a
  process of its own; one `httpx2.Client` times, interleaved, a keep-alive POST of the
  realistic request as an OpenAI chat body (bearer token) to it and the same POST to
  uvicorn with a bare ASGI app (same uvicorn settings, its own process) that reads the
  body and returns the front door's answer bytes (asserted equal first). The difference
  is the token check, the body decode and vendor mapping, one `acomplete()` round trip
  to the cursor actor (a third process) and the vendor response.
- **P16**: `python -m replay_actor compare BASE CAND --json` timed whole (process start
  to exit) on two generated logs of 50,000 calls each (10,000 scoped samples of five
  calls, every 20th diverging in the candidate), with their request sidecars; its own
  peak RSS from `wait4` (P16m) against the two log files' size.
- **P1L, P12L, P14L**: P1's `complete()`, P12's `openai_client` call and P14's POST to
  `serve`, each twice, interleaved: without a run log and with one (the manifest's
  `log` key; `serve --log`). The ratio is what logging costs per call.
- **P15**: `replay-actor serve` of a replay manifest holding one embedding entry (16
  vectors of 1,536 float32 values); one `openai.OpenAI` client times, interleaved, its
  `embeddings.create` of the 16 texts (the SDK's default base64, decoded by the SDK) to
  it and to the bare uvicorn app of P14 returning the front door's answer bytes (the
  vectors asserted equal first). The difference is the token check and body decode, one
  `acomplete()` round trip to the cursor actor carrying the 24,576 numbers as raw
  float32 (docs/architecture.md, "Wire protocol": the actor converts the entry's JSON
  once, on its first call, and keeps the reply; every timed call is a later one) and
  base64 of those bytes.
- **P20**: `benchmarks/load.py` (its docstring is the method): `wrk -t2 -c64 -d5s`
  POSTing the realistic chat body with the token to `replay-actor serve` (a replay
  manifest on the 100-entry fixture) and to the bare uvicorn app of P14 returning the
  same answer bytes, interleaved; requests a second, ours / bare, and any answer not
  2xx fails the row (P20a). P20b: 64 asyncio tasks on one `openai.AsyncOpenAI` client
  against each. `python -m benchmarks.loadprofile` measures both servers' CPU a request
  (psutil) and samples the front door with py-spy under the same load.
- **P17**: `replay-actor run` of a replay manifest on the 100-entry fixture with
  `python -c pass` as COMMAND, timed whole (process start to exit: the acquisition, the
  front door, the child, the summary), sealed in a network namespace against the same
  command with `--seal off`, interleaved. The difference is the child's `unshare`, its
  loopback brought up and its listening socket handed to `run`.
- **P19**: `benchmarks/recording.py` (its docstring is the method): an evaluation of
  10,000 new calls (64 concurrent, an httpx2 client) against a loopback vendor (uvicorn,
  a bare ASGI app answering each chat completion after 50 ms with ~1.5 KB made from the
  request's bytes), under `replay-actor run` with a record manifest whose fixture holds
  100,000 entries (a fresh copy each time), against the same client straight to the
  vendor, each timed whole as a user waits for it, the sides alternating, 3 runs each;
  the client's own time for its calls is shown beside. P19m is the peak RSS of `run`
  (`wait4`, so the larger of `run` and the client) against 2 x the fixture + 200 MB;
  P19h compares the final `fixture_set_hash` with a recording of the same requests one
  at a time (sequential calls through the in-process transport).
- **P21**: a frozen tool call (docs/tools.md): an `httpx2` client's HTTPS `GET` of a
  search (~2 KB JSON answer) and JSON `POST` of a summary (~200 B) to a tool host on
  127.0.0.2, under `replay-actor run` of a replay manifest holding both exchanges, sealed
  (the proxy's `CONNECT` tunnel, TLS terminated with the run's authority, the exchange
  hashed and answered by the cursor actor), against the same client and calls over TLS
  to uvicorn with a bare ASGI app returning the same bytes. Each side is a client
  process of its own timing 300 pairs after a warm-up, one kept-alive connection; the
  sides alternate, 9 rounds.
- Every process a benchmark starts is stopped by its PID and reaped, every provider is
  released, and the run checks that no child process is left at the end: first that no
  `replay-actor` (psutil `name()`) is left among its descendants, then it ends its own
  zygote (`replay-zygote`, found by PID and checked by name; the library keeps it for
  the life of the process) through the library's exit path, which closes its channel
  and reaps it; worker processes' zygotes end with their worker in the same way.
"""

ANALYSIS: Final[dict[str, str]] = {
    "P1L": """\
The run log writes each line synchronously: one `write` of the whole line to an
`O_APPEND` file before `complete()` returns, so a run killed at any moment (SIGKILL
included) keeps the line of every call that returned (docs/attribution.md). That
`write` is most of the overhead: about 3.5 us in a tight loop, 8-10 us between two actor
round trips on this shared 2-core machine (the same on tmpfs, so not the file system);
the wrapper's own work (the request hashed once and handed to the handle, the fixture
line from the caller's index, the line's encoding) is about 3 us. Against a ~90 us call
that is 1.14-1.16 x. Meeting 5 % would take writing the line off the call's path (a
writer thread), which gives up the guarantee that a killed run keeps every returned
call's line; it was not done. P12L and P14L, whose calls are milliseconds, meet it.""",
    "P14L": """\
As P1L: the front door's `acomplete()` adds one synchronous `write` of the line per
request, a few microseconds on a ~1 ms request.""",
    "P1": """\
`complete()` is `request_hash` in the caller plus one round trip to the actor over an
AF_UNIX stream socket. The floor's two parts are each timed back to back; a call is not:
while the caller hashes (~34 us) the actor sleeps, and waking it and then the caller
from idle costs ~20-30 us here ("Where a call's time goes"), more than all the code on
both sides (~5 us). That wake-up, not code, is what moves the ratio between runs, and it
depends on where the two processes sleep: on one core a call took 54 us, on two 93-111 us
(measured with both pinned; see "Where a call's time goes"). Keeping a side awake by
polling was tried and made it worse on two shared cores. On a busy machine one round of
the echo and of `complete()` can also land on different sides of another job's burst:
compare the IQRs, and the median of per-round ratios in the "what" column.

Why a wake-up costs so much here: this machine is a Firecracker (KVM) guest booted with
`cpuidle_haltpoll.force=1 haltpoll.guest_halt_poll_ns=0` (an idle vCPU halts at once,
and waking it is a VM exit and re-entry) and `sched_vcpu_pack=15` (the scheduler packs
runnable tasks onto few vCPUs, so the caller and its actor often share one).

Issue 28 built and measured the wake frame the core refactor proposed (commits d8d8392,
0b49cd4, cf66c02, then reverted): a `WAKE` frame (no reply) sent before hashing, after
which the actor polled for the request without sleeping (up to 200 us, yielding its
core) and the caller polled for its reply (up to 100 us); each channel measured its
calls both ways and kept the faster. The fault suites and the soak passed. Measured
A/B in one process, the kinds of call interleaved round by round (`/tmp` scripts, 11
rounds of 300 calls; load average 1.0, the quietest of the afternoon): a call with
`WAKE` took 172 us against 53 us without (3.3 x; 2-3 x at loads 3-7, and once 2 x
*faster* at load 3.1); the adaptive channel chose plain calls and cost ~3-6 % for the
choosing (P1 1.16 and 1.22 against 1.10 and 1.15 before, two runs each; with a busy
process on each core 1.04 against 1.15, within the noise). Polling takes the very
vCPU the other side needs when the two share one, which on this machine is the rule,
so the wake frame was dropped; a later attempt can start from those commits.""",
    "P1b": """\
As P1: the floor (a raw socketpair exchange, back to back) never lets either side go
idle, a call does (see P1 and "Where a call's time goes").""",
    "P15": """\
The floor answers canned bytes; the front door turns the stored vectors into them per
request. Until this round the 24,576 numbers crossed from the actor as JSON text and
were parsed in the front door (~0.93 ms, msgspec at ~38 ns a number), then packed as
float32 again (~0.35 ms) for base64. They now cross as raw float32
(docs/architecture.md, "Wire protocol"): the actor converts an entry whose vectors
float32 holds exactly once, on its first call (the JSON decode, a check that every
value survives float32, the packing: about 1.5-2 x the old parse, paid once), keeps the
reply, and every later call copies ~98 KB instead of parsing 500 KB; base64 is those
bytes, float their values, exactly the numbers the JSON holds. P15's timed calls are
later calls. An evaluation that asks each embedding once pays the conversion in the
actor instead of the parse in the caller, slightly more. On two shared cores the spread
is wide: compare the IQRs and the paired ratio.""",
    "P19": """\
Recording itself is no longer the cost: an answer is appended to the journal (many per
`fdatasync`, 0.1 ms each on a preallocated file) and checked against the ceilings in
constant time, and the fixture is rewritten once, at the end (issue 36: 500 calls onto
20,000 entries took 33 x the straight time, growing with the fixture). Measured
in-process with an instant adapter, a recorded call costs about 0.1 ms of CPU more than
a live one, whatever the fixture's size. What remains is the front door, which every
call crosses twice (the client's request in, the vendor's request out), on two cores
that the client, the vendor and `run` share; the client alone (httpx2) spends ~1.1 ms of
CPU a call, so the straight side is CPU-bound too. Measured per process (psutil, 10,000
calls): `run` spent 21.5 s of CPU (2.1 ms a call) when its async client was httpx2's;
aiohttp's `ClientSession` (now the async path's client where installed: a third of
httpx2's CPU at 64 calls in flight, adapters/_aclients.py) brought it to 12 s, but only
once the proxy variables and `~/.netrc` were no longer read per request (aiohttp's
`trust_env` does that in a worker thread, ~0.7 ms a call); `run`'s tunnels moving from
h11 to httptools (a recording under `run` freezes tools, and tools used to force h11)
brought it to ~9.5 s (0.95 ms a call). Whole runs went 24.0 s -> 14.5 s (2.06 -> 1.45 x
straight), the calls alone 1.95 -> 1.31 x. What is left per call is mostly syscalls
(the socket writes and reads of both legs: ~30 % of the event loop's samples) and
aiohttp's request machinery; fixed costs come on top: `run`'s start-up (~0.7 s, P17),
loading and validating the 100,000-entry fixture (~0.35 s), and at the end the final
compaction and the set hash for the summary (~0.4 s), ~1.7 s of the 14.5 s. Recording
through `run` on these two cores therefore stays above 1.1 x: the relay of a call costs
nearly what the client's own call does.

The CPU budget, measured per process with psutil over one recording of the 10,000
calls each way (`/tmp` script, quiet machine, twice each): straight, the client spends
10.6-10.9 s of CPU in its 10.6 s of calls (one core, all of it) and the vendor 3.6 s;
under `run`, the client 10.8-11.3 s, `run` 9.6-10.3 s and the vendor 2.5 s, ~23.5 s of
CPU in a ~13.6 s calls phase on two cores. `run` starts in ~1.2 s with this fixture
(`replay-actor run MANIFEST -- true`: the imports ~0.3 s, the load ~0.35 s, the summary's
set hash ~0.15 s), about 1 s more than the client's own start, so 1.1 x (~12.1 s against
~11.0 s straight) leaves the calls phase no time at all beyond the straight one: the
client must keep its whole core, and `run` and the vendor fit in the other, `run` at
~7.5 s of CPU (0.75 ms a call) at most, with perfect scheduling. Tried in this round: the
recorder kept the canonical bytes it hashed instead of encoding the request again for
its sidecar (`run`'s CPU -2-4 %); the sync HTTP client is made on the first sync call
(the front door only awaits: 25-70 ms less start-up); `uvloop` as `run`'s event loop
cut `run`'s CPU by ~4 % and left the wall time where it was (15.6-15.8 s), so it is not
used (a dependency for nothing a user would see).

P19m in the full run of 2026-12-06 (3.66, 1,067 MB) measured the benchmark, not `run`:
Linux gives a process the larger of its own high-water RSS and that of the memory it ran
in before `exec`, and `run` was spawned by the benchmark's own process, grown to ~1 GB by
the sections before P19 (a tiny child of a process holding 800 MB reports 826 MB the
same way). `run` and its client now start through a small parent (`_PEAK` in
benchmarks/recording.py) that reads their peak with `wait4`; the same child of the same
800 MB process then reports 10 MB. Rerun after the fix (`.venv/bin/python -m benchmarks
--only P19 --passes idle --runs 1`, 2026-12-06 05:57 UTC): P19m 254 MB against the 292 MB
bound (0.872, met, as in stop 40's P19-only run, 255 MB), P19 1.34, P19h met.""",
    "P14": """\
The floor is uvicorn answering canned bytes: it reads the body and writes. The front door
does, per request, what the floor skips: the token check, a strict decode of the ~18 KB
body (~58 us: msgspec, with the repeated-key rule proven by a colon count, where the
standard library's `json` with a hook took ~79; docs/sdk.md says why bodies are read
strictly), the vendor mapping (~15 us), one `acomplete()` (the
request hash, ~34 us, and a round trip to the cursor actor, a third process, with the
wake-ups of P1) and the vendor answer (~10 us). Measured in-process (the app called
directly, no HTTP) those come to ~300 us a request; the largest single part is the
actor round trip woken from idle (~150 us, as in P1).""",
    "P2": """\
The actor's table is a dict keyed by the request hash, so a lookup does not depend on
the fixture's size; the only size effect is cache misses on a larger heap. A miss of
this target is noise between the interleaved batches (compare the IQRs, and the
series in the plot, which should be flat).""",
    "P8": """\
The actor is a fork of the zygote, and RSS counts every page the two share
copy-on-write: the interpreter and the whole parsed table (the zygote parses the
fixture and the actor inherits it; `gc.freeze()` keeps the collector from dirtying it),
so the actor's RSS is about the zygote's, less the library pages the child has not
touched yet, while its USS (pages only the actor maps) is ~2 MB. The table itself is
~1.3-1.4 x the file: 100k `str` hashes (~120 bytes each with the header) and a `bytes`
object per entry holding the kept line, plus the dict's slots; the parse's scratch is
returned to the kernel (`malloc_trim`) before the fork. P8b's actor also maps the three
smaller fixtures its zygote caches for the P1 run (~8 MB, ~0.17 x this file), pages it
never touches and does not own: that is what separates P8b from P8a, and it is shared
memory, not the actor's (see USS/PSS in the "what" column). What would lower RSS itself
(library change, not made here): keep only the response bytes per entry, or one
contiguous buffer of responses with offsets.""",
    "P4a": """\
Where the time goes (timed alone, best of many short batches, this machine): the floor
is the sorted encode of the whole request ~11.5 us + sha256 of its ~17 KB ~10 us.
`request_hash` spends: one `msgspec.convert` of the messages (~2.5 us: the typed check
of the request), their sorted encode (~5 us), the configuration -- tools, their schemas,
params, tool_choice -- as remembered bytes (~7 us: one `marshal.dumps` of it, a C walk
that is the exact key, and a comparison), the same sha256 (~10 us), and ~1 us of
Python around them. An evaluation sends the same configuration with every call, and so
does this benchmark: the request's configuration is remembered from its second sight
(docs/request.md, "What hashing costs"). Until then, or for a request whose tools are
its own, the schemas are checked and patched the slower way (one typed
`msgspec.convert` of every schema, a Python walk where there are floats), ~2-3 x the
floor; a configuration field that changes on every call (a seed, a scope) costs only its
own check. What is left is sha256 and encoding the messages, which the floor pays too,
the typed check of the messages, and the walk of the configuration that proves it is
the one remembered.""",
    "P4b": """\
The `rfc8785` package is itself fairly quick on this request (mostly long strings,
which it escapes with a regular expression), so the speed-up is capped by what
`request_hash` spends beyond the sorted encode and the hash (P4a): with sha256 alone at
~10 us of ~28, a 15 x speed-up needs `rfc8785` at ~420 us or more, which it is here
with little to spare. Bytes are identical (asserted before timing).""",
    "P5": """\
P5a reads the target's "a bare no-op child started the same way" strictly: an actor is a
child forked by the warm zygote, so its floor is a no-op child forked by a warm
process started as the zygote is. (P5b, against a fresh interpreter as actors used to
be started, is the loose reading.) The steps, differences of this run's medians, are
under "Measured steps". The fork itself is the floor: a no-op child of a warm ~23 MB
interpreter costs ~1.7-2.9 ms on this machine (page tables copied, then the child's
first writes fault copy-on-write pages), against ~17-25 ms for a fresh interpreter.
Holding the parsed 1k-entry table adds nothing measurable (a few hundred kilobytes).
The actor's set-up in the child added ~1.5-2 ms, i.e. most of the floor again, which is
why the ratio sat near 2 (2.02-2.16 in the runs of 2026-12-06, before this round).
Timed step by step inside the zygote and its child (a probe writing `perf_counter`
differences, medians of 30 acquisitions of the 1k fixture, 2026-12-06): the zygote's
check that the cached file still holds its bytes 0.80 ms, the fork 1.9-2.3 ms (the
floor's too), the child's first steps (closing the zygote's channels) 0.25 ms, naming
the process and wrapping its socket 0.65 ms, the owner's pidfd and identity 0.77 ms,
the table wrapped (`Actor`) 0.07 ms, the listener and the READY frame 0.16 ms. Three of
those were more than their work: the identity went through psutil (`Process`,
`status`, `create_time`: two reads of `/proc/PID/stat` and one of `/proc/stat`, all in
psutil's Python, each first run in the child a round of copy-on-write faults), now one
read of `/proc/PID/stat` (the start time since boot; `io/procs.py`): 0.77 -> 0.25 ms;
the process name loaded the C library through ctypes in every child, now bound once in
the zygote (`LibcFunction`): 0.65 -> 0.45 ms with the socket set-up; the file check
read into a fresh 1 MiB buffer, whose pages faulted in every time because the zygote
gives its free memory back after a parse, now a 64 KiB buffer each thread keeps:
0.80 -> 0.29 ms (of which the read and comparison of the 458 KB file ~0.25 ms). An
acquisition went from ~5.2-6.4 ms to ~4.2-4.4 ms in the same probe, and
`--only P5 --passes idle --runs 5` gave P5a 1.41 [1.31 to 1.79] and P5c 1.6 [1.44 to
1.85] (2.02 and 1.96, 3 runs, in the same morning before the change). What is left over
the floor is Python run for the first time in the child (each first touch of a page
costs a copy-on-write fault) and the content check, kept exact on purpose (a file
rewritten within one timestamp tick must not be served from the cache).""",
    "P5c": """\
P5c is P5a in the benchmark's own process, whose zygote was asked for the 100k, 10k,
100 and 1k-entry fixtures first (the P1 run's state). The zygote parses and keeps only
fixtures of at most 2 MiB (8 MiB together, idle entries dropped after 30 s); larger
ones are parsed by their actor after the fork. So the zygote that forks the 1k actor
holds the 100 and 1k tables only, as in P5a: before that rule it also held the 100k and
10k tables (~70 MB) and the heap their parse left, which made every fork copy more page
tables and every child fault in more copy-on-write pages (P5c was 2.24).""",
    "P6": """\
Profile (cProfile, one load of the 100k-line file): about half the time is the
per-line Python loop in `_Parser._run` itself (slicing, the length and ceiling checks,
the table insert), the rest msgspec's typed decode of each line, one re-encode of each
response into a reused buffer (the canonical bytes, and the proof that no key was a
duplicate), the split of the file into lines and the read. The floor decodes each line
untyped once and keeps nothing, so the share sits at ~0.5: the remaining lever is
moving the per-line work out of Python (e.g. decoding the whole file as one array of
typed entries, with the per-line checks done in bulk).""",
    "P6b": """\
The same 100k entries as P6, written by `json.dumps` with its defaults. Before, no such
line passed the fast path (its length differs from its re-encoding's, which was the
duplicate-key proof), so every line went to the precise checker: ~0.03. Now the whole
file is judged in one bulk pass (docs/fixture-format.md, "How loading is fast"), where
each line is decoded and re-encoded through a C-level `map`, and the checks run once on
the file. Issue 28 took it from 0.36 to ~0.55: the `\\u0022` search ran twice with
`bytes.find` (27 ms each; one `re` search finds the backslash with `memchr`, and a
`\\u0022` is now counted as one more quote out instead of sending the file line by
line), the file was copied to drop its last newline and split whole into fresh pages
(now 64 KiB slices, whose memory is reused), every response was joined into one buffer
and its offsets packed (a plain load now keeps the list; a holder writes it into shared
memory), and the hashes' form is checked with strided slices. What is left beyond the
floor's decode: the re-encode, the quote counts, the table. Turn 5 measures the worst of
six layouts (`benchmarks/layouts.py`). In its `--only` run (load average 4-7 from other
work on the two cores) every layout stayed on the bulk pass (no layout fell to 0.08 as
before), but the ratios were below the quiet run's across the board, compact 0.47 and
CRLF 0.67 included: P6b's worst, `json.dumps` with UTF-8 text, blank lines and keys
reordered, 0.36 [0.32 to 0.40]; P6c's worst, the `json.dumps` file's first acquisition,
0.23 [0.19 to 0.35]. Missed in that run.

Profiled since (a `/tmp` script timing each step of the cut-and-prove pass over the
100k `json.dumps` file, quiet machine): the decode into the typed entry 187 ms (the
floor's own decode of the same lines: 191 ms), the re-encode that makes the canonical
responses 95 ms, the counts that prove no key was dropped 84 ms (the quotes of the text
and of the re-encoding, ~20-40 ms each, and the `\\u0022` escapes wherever a backslash
is, ~21 ms: a `re` search, which finds them faster than `bytes.count` or `bytes.find`
of `\\u` here), the cut into lines ~20 ms: ~0.40-0.47 s against ~0.17-0.19 s,
0.37-0.42. The compact file (referred to where it lies: no re-encode kept, no counts)
loads at 0.50-0.52. Reaching 0.5 on a spaced layout needs the proof of no dropped key
without a count over the text or the re-encoding of every response at load; neither was
found in this round (`msgspec.json.format` to strip the spaces first costs as much as
the decode). P6c, the first acquisition, is the load plus the holder's work: sharing
the table (into a memory file with `writev`, the file's digest taken in a thread
meanwhile) now costs ~53 ms for the `json.dumps` file (~100 ms before) and ~34 ms for
the compact one (~54 ms), so P6c follows P6b.""",
    "P5d": """\
Before, every acquisition parsed the file in its own actor: 3.4 s at 250 MB in the
compact layout (~16 s in `json.dumps`' layout). Now a holder keeps one validated copy
(docs/architecture.md, "Large fixtures"); a later acquisition costs the byte-for-byte
check of the file against it (~0.05-0.15 s for 250 MB) and a fork from the holder,
whose buffers are in shared memory so that fork copies no page tables for them (15-30
ms, against 130-240 ms for the same table in private memory).""",
    "P8c": """\
Every actor is forked from the holder and reads its table without writing to it (the
table refers into one buffer: no reference count of a line changes), so each extra
acquisition adds the actor's own pages only, ~2.5 MB. Before, each actor parsed its
own copy: 4 acquisitions of the 250 MB fixture held 1,162 MB PSS (307 MB now).""",
    "P11": """\
The actor keeps a non-blocking socket and an input and output buffer per peer: a peer
that sent half a frame costs the loop one wake-up (its partial frame is buffered) and
nothing after, so the caller's latency distribution with and without it is the same
within noise. Before, the actor read each frame with blocking reads bounded by 2 s,
so such a peer delayed every other caller by up to 2 s.""",
    "P9a": """\
Each thread has its own channel to the actor, so no thread waits for another's
exchange; what threads share is the GIL. CPython lets go of it around a socket write
and a sha256 update of 2 KB or more, and with eight threads each release hands it to a
waiting thread: the one that let go then sleeps until it gets it back. Measured on this
machine with the realistic request, that cost 8.3 voluntary context switches and ~120 us
of caller CPU per call (45 us alone), and 8 threads reached 0.75 x one thread's
throughput. A crowded handle (a second thread has a channel) now keeps the GIL through
its short steps: the hash is fed to sha256 in pieces below hashlib's release size, and
the frame is written by a foreign `send(MSG_DONTWAIT)` that keeps the GIL and never
waits (`replay/io/held.py`); the GIL is let go only to wait for the reply. That is 2.1
switches per call, and the caller's hashing of one thread now overlaps the round trips
of the others (docs/concurrency.md, "Threads on one handle").""",
    "P9c": """\
Redefined in turn 5: 64 tasks on `acomplete()` against the in-process floor (the hash,
a dict lookup and the decode, no actor), as P10 for `complete_many`. On one event loop
the caller does all of a call's work on one thread, so the floor is what the async path
can approach, not exceed. What it adds per call is asyncio's: a future, a task switch,
the frame, a share of the batched writes and of the reply reads (the reader resolves a
read's replies in one pass; the handle awaits the link's future itself).""",
    "P9b": """\
One evaluation is a ping-pong between the caller and its actor; four are eight processes
on two cores, so the aggregate is bounded by the CPU a call needs (~45 us: the hash, the
two sides' code, the kernel), about 23 us a call over two cores, minus the switching
between them. Since the actor follows its caller's core, one evaluation alone no longer
pays two wake-ups across cores, and the ratio fell while nothing got slower. Measured
A/B in alternating runs (`REPLAY_ACTOR_FOLLOW_CORE=0` and `1`, `--only P9 --runs 1`):
one evaluation 61-67 us a call following against 91-93 us free; four together 36-46 us
against 40-42 us; the ratio 1.46-1.66 against 2.17-2.33. The target asks for scaling,
and a faster single evaluation leaves less to scale: the aggregate itself is what it
was. On this shared machine other work also takes part of the two cores while the
benchmark runs (see the load average under Machine). In turn 5's
run (`--only P5,P6B,P9,P15,P20 --passes idle`, load average 4-7 from other work on the
two cores) it was 0.87 [0.65 to 0.97]: with the cores taken by others, four evaluations
have no second core to scale onto; nothing in this round changed the synchronous path
it measures.""",
    "P20": """\
Under `wrk -t2 -c64` both servers are bound by CPU on two cores they share with `wrk`
itself, so the ratio of requests a second follows the ratio of CPU a request.
`python -m benchmarks.loadprofile` measures both servers' CPU a request (psutil) and
samples the front door with py-spy under the same load; the same tool on the tree
before this round (commit 3aa9776) and after it, one after the other (load average
3.7-4.2; CPU microseconds a request, a part's share of the samples times the total):

| part of a front-door request | before (h11) | after (httptools, collector) |
| --- | --- | --- |
| read the body: route, strict JSON, vendor mapping | 140 | 142 |
| the ASGI app: token, body, the two socket writes | 86 | 57 |
| the request hash | 45 | 31 |
| HTTP: uvicorn's protocol and parser | 43 | 16 |
| the event loop itself (epoll, scheduling) | 27 | 25 |
| the actor round trip (caller side) | 15 | 19 |
| asyncio in callbacks, the vendor answer | 12 | 11 |
| **the front door, a request** | **368** | **303** |
| the bare app, a request | 44 | 44 |
| requests a second, ours / bare | 2,293 / 15,543 = 0.15 | 2,535 / 15,166 = 0.17 |

Tried: httptools instead of h11 (what the bare app runs; the protocol subclassed so a
proxied request's target and a CONNECT still reach the seal's refusal whole): HTTP and
response formatting ~45 us less; the serving process's collector frozen and young
collections every 50,000 allocations: within the noise here; the body read from its
bytes: ~5 % of the strict read (callgrind: 0.96 M -> 0.91 M instructions). What is left
is the front door's own work, which the bare app does not do, and it is larger than the
bare app's whole request: counted with callgrind for the realistic body, the strict read
is ~0.90 M instructions (msgspec's decode 0.30 M, the re-encode and colon counts that
prove no key was repeated, the depth bound), the vendor mapping ~0.19 M, the hash
~0.73 M, the answer ~0.07 M. 0.6 x the bare app's throughput needs a front-door request
under ~1.7 x the bare app's CPU (~75 us); this work alone is more. Spreading requests over
several serving processes (each with a copy of the handle: the cursors live in the
actor, so sequences stay exact) would raise the ceiling on more cores, with the
summary's counters and the run log merged across them; on two cores shared with `wrk`
the CPU is the bound either way. Not done in this round. P20b (64 `AsyncOpenAI` tasks)
is client-bound and met.

The table above is skewed: `loadprofile` counted every sample of the serving process,
and py-spy samples the reaper thread while it waits in `epoll` (a sixth of all samples,
put down to "the event loop itself", every other part scaled down with it). Counting the
main thread's samples only (fixed 2026-12-06), the same tool, two alternating runs each
of commit 2294069 and of the tree after it, gives the shares of a front-door request's
CPU: reading the body ~49-51 %, the ASGI app 17-21 %, the hash ~12 %, the actor round
trip 5-6 %, the event loop 4-5 %, the vendor answer 3-5 %, asyncio in callbacks ~3-4 %,
uvicorn's HTTP ~2 % (the shares are steady; the CPU a request moved from 373 to 505 us
between runs of the same tree, and the bare app's from 64 to 92 us, with the machine).
Within reading the body, a line profile (py-spy): msgspec's decode ~16 % of the
request, the line of `AsyncServing.serve` that ends the request ~12 % (where the decoded
body, ~600 objects, and the neutral request are freed), the strict checks ~10 %.
The strict checks were cut in this round: the `\\u` search by regular expression
(~6 us against `bytes.find`'s ~19 us in the 18 KB body) and the colons and openers
counted in one pass (~10 us against ~20 us); the strict read went from 97.5 to 70 us
(`loads_strict_utf8` of the realistic body, medians of 7 rounds of 3,000, the two
versions alternated in one process). That is ~7 % of a request's CPU, less than this
machine's drift between two runs: `--only P14,P20 --passes idle --runs 3` gave P20a
0.195 [0.192 to 0.25] and P14 1.49 [1.31 to 1.56] (1.66 [1.65 to 1.77] that morning
before the change). The bound stands: the front door's own work is ~80 % of its
request, about four times the bare app's whole request.""",
    "E1": """\
The sidecar's 10,000 requests (~170 MB) share their first 20 messages with the missing
request, so every one ties on the first ranking criterion. Each line is decoded once into
raw byte slices per field and per message (in C); messages are compared as bytes; an entry
whose differing slices already outnumber the best's paths (or equal them, with a later
hash) is never diffed, so only a handful are decoded into Python objects. What remains is
reading the file (~0.1 s of the total: it is read, not mapped, so a file truncated meanwhile
cannot fault the caller), the slicing decode, and the per-entry byte comparisons.""",
}

#: Where one ``complete()`` spends its time (``python -m benchmarks.hotpath``), measured
#: apart from the full run; rendered under its own heading in docs/benchmarks.md.
PROFILE: Final = """\
Each step is timed on its own by `python -m benchmarks.hotpath`, in interleaved rounds
of 1,000 calls, and each step's best round is kept (on a shared machine the least
disturbed one): the realistic request and the 100k-entry fixture of P1. The caller's
`SyncLink` and the actor's loop code are timed in one process against a peer whose
bytes are already waiting, minus the bare `read` and `write`, so no sleep is counted in
them; the wake-ups are what is left of `complete()` after every measured step.

The bars above this run's are the call as it was before the physical-floor work (commit
`314febe`) and as it is now, measured side by side in the same minutes by
`python -m benchmarks.before` (3 profiles of each, alternated; each step's median;
`benchmarks/results/profile-before.json`): a shared two-core VM moves its wake-ups by
tens of microseconds from one minute to the next, so only bars measured beside each
other compare. The code on both sides did not move: ~5 us of the call (the actor's
Python ~3 us, `SyncLink`'s ~1.5 us, the frame and the decode under 1 us), the hash ~26
us, the raw exchange on one core ~12 us. What moved is where the two processes are
woken: 47 us of wake-ups before, 9 us now, since the actor follows its one calling
thread's core (below). The rest of the physical-floor work is elsewhere: threads sharing
a handle (P9a: a crowded handle keeps the GIL through a call's hash and write), the
first acquisition of a large fixture (P6b, P6c) and the peer comparison (P18).

The largest share is not code: while the caller hashes, the actor has nothing to do and
sleeps, and so does the caller while the actor answers; waking each from idle costs
~20-30 us here, where the floors' exchanges, measured back to back, never let either
side go idle. Three ways to keep a side awake were tried and dropped: the actor polling
for up to 100-300 us after each answer, the caller polling for up to 50 us before it
blocks in `read`, and a wake frame sent before the hash (the actor's wake-up overlapped
with the caller's hash). On two cores shared with other work each made `complete()`
slower (the spinning or early-woken side takes the core the other side needs), and an
idle actor must cost nothing (P7).

Where the wake-ups go was measured apart (a caller and a child exchanging the request
frame, with the caller's hash before each exchange or without): **which core** the two
sides sleep on. Pinned to one core, an exchange costs 11-12 us whether or not the
caller works in between; on two cores, 28-56 us: on this VM a wake-up across cores is
an interrupt to a halted virtual CPU, ~15 us each way. Left free, the scheduler keeps
them apart (a woken task goes back to its previous core while that core is idle), and a
`complete()` of the realistic request measured 93-111 us free against 54 us with the
caller and its actor pinned to one core. How the child waits matters only back to back:
with no hash between exchanges, a child blocked in `read` was pulled onto the caller's
core (15 us) where one in `epoll` was not (43 us); with the hash between, as in a call,
both land in the 28-56 us range. So while one thread calls `complete()`, the
acquirer's handle now pins its actor to that thread's core and moves it when the thread
moves (`replay/io/cores.py`, docs/concurrency.md "Where the actor runs"; never the
caller, whose process is the application's). The caller still moves now and then (a
woken task goes to an idle core), so a call lands between the two: measured A/B in one
process with the realistic request, 69 us following against 96 us free (10 rounds of
1,000 calls each way, interleaved; the actor moved on ~20 % of calls). Threads,
`acomplete` and `complete_many` end the following: there the actor working beside the
caller is worth more."""
