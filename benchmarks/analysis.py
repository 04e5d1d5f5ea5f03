"""The prose of docs/benchmarks.md: how each number is taken, and, for a target this
run missed, what limits it (from profiling; shown only when the target is missed)."""

from __future__ import annotations

from typing import Final

__all__ = ["ANALYSIS", "METHOD"]

METHOD: Final = """\
- **Realistic request**: a system prompt, 20 messages of ~500 characters, 5 tools with
  JSON-schema parameters, `tool_choice` and `params` with a float temperature (0.7):
  ~17 KB canonical. Fixture lines are ~460 bytes (a ~300-byte neutral response), so the
  100k-entry fixture is ~46 MB; the realistic request's entry is the last line.
- **P1/P2/P8**: four acquisitions (100, 1k, 10k, 100k entries) held at once; every round
  times a batch of `complete()` calls on each, a batch of local `request_hash` calls and
  a batch of 100-byte round trips over a `multiprocessing.Pipe` to an echo child started
  by a *spawn* context. A round's floor is its hash time plus its echo time. P8 reads
  the 100k actor's RSS (psutil) after those calls, against a bare interpreter started as
  the actor is that has imported `replay_actor`.
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
  realistic request is already normalised; also asserted).
- **P5**: `acquire()` to ready on a 1k-entry fixture (release not timed) vs a no-op
  `subprocess.Popen([sys.executable, "-c", ...])` with the same environment and a passed
  socket fd, timed until it writes "OK" on it. The run's first acquisition is not timed.
- **P6**: `load_fixture` of the 100k-line file vs reading the file and
  `msgspec.json.decode` of every line, no validation; reading included on both sides.
- **P7**: per kill, a fresh owner process and acquisition; pidfds opened on both while
  alive; SIGKILL to the owner by PID; time until the actor's pidfd reports its exit.
  Idle CPU: `/proc/PID/schedstat` on-CPU nanoseconds of an actor nobody calls, over at
  least 10 s (the kill loop runs meanwhile, on other actors), scaled to 10 s.
- **P9**: threads start on a barrier; worker processes each acquire their own actor and
  are told to go together, and aggregate throughput is all calls over first start to
  last end; asyncio gathers 400 `acomplete()` tasks (report only).
- Every process a benchmark starts is stopped by its PID and reaped, every provider is
  released, and the run checks that no child process is left at the end.
"""

ANALYSIS: Final[dict[str, str]] = {
    "P1": """\
`complete()` is `request_hash` in the caller plus one round trip to the actor over an
AF_UNIX socket (a multiprocessing `Connection`), which is what the floor is made of, so
the two differ only by the handle's lock, the reply's decoding (~300 bytes) and the
actor's dictionary lookup. A miss here is noise: on a shared 2-core machine one round
of the echo and of `complete()` can land on different sides of another job's burst;
compare the IQRs, and the median of per-round ratios in the "what" column (each
round's `complete()` batch against the floor measured right next to it), which is less
sensitive to drift than the ratio of the two medians.""",
    "P2": """\
The actor's table is a dict keyed by the request hash, so a lookup does not depend on
the fixture's size; the only size effect is cache misses on a larger heap. A miss of
this target is noise between the interleaved batches (compare the IQRs, and the
series in the plot, which should be flat).""",
    "P8": """\
What the actor holds for the 100k-entry fixture: a dict of 100k `str` hashes (~120
bytes each with the object header) to `bytes` values, plus the table's own slots. In
this run's loader each stored value was ~490 bytes (the whole ~460-byte line is kept,
not only the ~300-byte response), so the live table alone is ~65 MB (tracemalloc),
and the load peaks at ~127 MB traced: memory freed after the peak (per-line
temporaries, in small blocks) stays in the process, as glibc does not return
fragmented heap pages to the OS. What would close the gap (library change, not made
here): store only the response bytes, avoid whole-file temporaries, and after the
load call `malloc_trim(0)` (ctypes, glibc only) in the actor to hand freed pages back.""",
    "P4a": """\
Profile (cProfile, 2,000 hashes of the realistic request): about half of
`request_hash` is `normalise_request` -> `_prepare_free_fields` ->
`_canonical._clean`, a Python-level recursive walk over every free-form value (here
the five tools' JSON-schema `parameters`, ~35 nodes each, plus `params`) that checks
the JSON domain and replaces floats by their RFC 8785 text. `msgspec.convert` (3 us),
the sorted encode (8 us) and sha256 of 17 KB (~10 us) are the floor's own costs. What
would close the gap (library change, not made here): check and patch free-form values
in C instead of walking them, e.g. encode each with msgspec (which already rejects
non-JSON types), then decode it again with a `float_hook` that yields the JCS text as
`msgspec.Raw`, and look for the rare cases (integers beyond 2^53, keys outside the
BMP) with a byte scan of the encoded text; walk in Python only when that scan hits.""",
    "P4b": """\
The same cost as P4a: the `rfc8785` package is itself fairly quick on this request
(mostly long strings, which it escapes with a regular expression), so the speed-up
is capped by the Python-level walk of the free-form fields in `request_hash`. Bytes
are identical (asserted before timing).""",
    "P5": """\
`python -X importtime -c "from replay_actor._actor import main"`: importing the actor
runs `replay_actor/__init__.py`, which imports the whole public API: `_provider`
(asyncio, ~25 ms), `_manifest` -> `_live` (`importlib.metadata`, email parsing,
~20 ms), `_record`, besides what the actor needs (msgspec ~14 ms, psutil ~12 ms,
`_canonical`, `_fixture`, selectors, `multiprocessing.connection`). That is about
100 ms of imports against a ~25 ms bare interpreter; the 1k-entry fixture's load is a
few ms. What would close the gap (library change, not made here): make the package's
`__init__` lazy (PEP 562 `__getattr__` for `open_provider`, the live and record
providers, and asyncio in `_provider`), so that `python -c "from replay_actor._actor
import main"` imports only the actor's modules; dropping psutil from the actor (pidfd
plus `/proc/PID/stat` start time for the owner's identity) would save ~12 ms more. The
floor itself is the interpreter's start-up including `site` and the editable install's
path finder.""",
    "P6": """\
Profile (cProfile, one load of the 100k-line file): the per-line Python loop in
`_Parser.run` (slicing each line, the depth/number pre-checks, `_store_fast`,
`_finish`) costs about as much as msgspec's typed decode itself, and every line is
also re-encoded (sorted) to obtain the canonical response bytes and to prove that no
key was duplicated; `bytes.translate` of the whole file for the fast-path classes and
the line splitting add two more passes. The floor decodes each line once and keeps
nothing. The loader is being optimised by its owner; this row is a measurement.""",
    "P9a": """\
Eight threads share one handle: the exchange is serialised by the handle's lock (one
request in flight per channel, by design), and the caller-side work, `request_hash`
(~50-70 us, mostly the Python walk of P4a), holds the GIL. The thread whose reply has
arrived must reacquire the GIL from threads busy hashing (the GIL's convoy effect:
an I/O-bound thread waits behind CPU-bound ones), so overlap of hashing with the
round trip is lost and switching costs are added. Cheaper hashing (P4a) shrinks the
GIL-held part and is the lever; request ids with a reader thread would let several
requests be in flight but would not remove the GIL hand-offs.""",
    "P9b": """\
One evaluation is a ping-pong between the caller and its actor, so it keeps roughly
one core busy; four evaluations are eight processes on two cores, so the ceiling is
about 2x, minus context switches. On this shared machine other engineers' test runs
took part of the two cores while the benchmark ran (see the load average under
Machine): the lone evaluation still finds a free core, four of them compete with
that load, so the ratio is bounded by the idle CPU, not by replay-actor (each
evaluation has its own actor; nothing is shared between them).""",
}
