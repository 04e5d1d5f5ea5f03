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

ANALYSIS: Final[dict[str, str]] = {}
