"""The ``replay-actor`` command line (docs/cli.md): validate, hash, inspect, lookup, stub,
and the authoring commands explain, add, coverage (``authoring/``).

Every command works in this process, without a cursor actor: the CLI is the authoring
tool around a fixture, not a replay provider. ``main(argv)`` returns the exit code
instead of exiting, so tests (and other tools) can call it in-process.

Exit codes: 0 success, 1 a rejected fixture or an invalid input, 2 a usage error
(argparse's convention), 3 a ``lookup`` or ``explain`` miss.

Boundaries, the same as the library's. A rejected fixture is reported by reason code and
line number only: those are all the loader hands over, and nothing here reads a
fixture's bytes itself. ``lookup --private`` prints no request hash anywhere. An input
the user passes that is not valid JSON is described by position, never quoted. Expected
failures print one ``replay-actor: error: ...`` line to stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

from ._canonical import canonical_json
from ._errors import FixtureError, ReplayError, ReplayMiss, RequestError
from ._request import canonical_request, request_hash
from ._strict_json import NotStrictJSON, loads_strict
from ._version import __version__
from .fixture import MISS, Ceilings, Cursors, entry_line, iter_rejections, load_fixture
from .replay.inspection import open_inspection_record
from .vendors import make_vendor, vendor_names

__all__ = [
    "EXIT_INVALID",
    "EXIT_MISS",
    "EXIT_OK",
    "EXIT_USAGE",
    "VENDORS",
    "main",
    "read_request_arg",
]

EXIT_OK: Final = 0
EXIT_INVALID: Final = 1
EXIT_USAGE: Final = 2
EXIT_MISS: Final = 3
#: What ``--from`` accepts: the vendor request bodies ``read_request_arg`` can read.
VENDORS: Final = vendor_names()

PROG: Final = "replay-actor"
_STDIN: Final = "-"
_STDIN_LABEL: Final = "<stdin>"
_HASH_PREFIX: Final = "sha256:"
_HEX: Final = frozenset("0123456789abcdef")


class CLIError(Exception):
    """An expected failure: printed as one line, mapped to an exit code."""

    def __init__(self, message: str, code: int = EXIT_INVALID) -> None:
        super().__init__(message)
        self.code = code


# -- output ------------------------------------------------------------------------------


def _write(data: bytes, *, stream: Any = None) -> None:
    """Write bytes to stdout exactly (UTF-8 whatever the locale; no newline translation)."""
    out = sys.stdout if stream is None else stream
    out.flush()
    buffer = getattr(out, "buffer", None)
    if buffer is None:  # a replaced text-only stream (some embedding tools do this)
        out.write(data.decode("utf-8"))
    else:
        buffer.write(data)
        buffer.flush()


def _print_json(value: Any) -> None:
    text = json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)
    # surrogateescape: a path from argv that was not UTF-8 goes back out as its bytes.
    _write(text.encode("utf-8", "surrogateescape") + b"\n")


def _error(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)


# -- input -------------------------------------------------------------------------------


def _label(source: str) -> str:
    return _STDIN_LABEL if source == _STDIN else source


def _read_json(source: str, what: str) -> Any:
    """Read one JSON document from a path or ``-`` (stdin), strictly.

    Strict means what the fixture format means: UTF-8 without a byte order mark, no
    ``NaN``/``Infinity``, no key repeated in one object (which value would count?). Errors
    name the input and a position, never its bytes: a request may hold a private prompt.
    """
    label = _label(source)
    try:
        if source == _STDIN:
            data = sys.stdin.buffer.read()
        else:
            with open(source, "rb") as handle:
                data = handle.read()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise CLIError(f"{label}: cannot read {what}: {reason}") from None
    problem: str | None = None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        problem = f"not valid UTF-8 (byte {exc.start})"
    else:
        try:
            return loads_strict(text)  # the transports' rules too (_strict_json)
        except NotStrictJSON as exc:
            problem = f"not valid JSON ({exc})"
    raise CLIError(f"{label}: {what} is {problem}")


def read_request_arg(source: str, vendor: str | None = None) -> Any:
    """The provider-neutral request in ``source`` (a path or ``-``).

    With ``vendor`` (``--from openai|anthropic``) the file holds that vendor's request
    body, as an SDK sends it or a log shows it, and is read through the one vendor
    mapping (docs/sdk.md, "The mapping"), so it hashes as the SDK call does. Errors name
    the input and the field, never its contents.
    """
    data = _read_json(source, "request")
    if vendor is None:
        return data
    try:
        return make_vendor(vendor).read_body(data).request
    except RequestError as exc:
        raise CLIError(f"{_label(source)}: {exc}") from None


def _add_from_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from",
        dest="vendor",
        choices=VENDORS,
        default=None,
        help=(
            "the request file is this vendor's request body (chat completions or "
            "messages), read as the SDK transports read it"
        ),
    )


# -- argument types ----------------------------------------------------------------------


def _hash_arg(value: str) -> str:
    digits = value[len(_HASH_PREFIX) :]
    if not value.startswith(_HASH_PREFIX) or len(digits) != 64 or not set(digits) <= _HEX:
        raise argparse.ArgumentTypeError(
            "a request hash is 'sha256:' followed by 64 lowercase hexadecimal digits"
        )
    return value


_CEILING_NAMES: Final = tuple(Ceilings.__struct_fields__)


def _ceiling_arg(value: str) -> tuple[str, int]:
    name, sep, number = value.partition("=")
    name = name.strip().replace("-", "_")
    if not sep or name not in _CEILING_NAMES:
        raise argparse.ArgumentTypeError(
            f"expected NAME=INTEGER with NAME one of {', '.join(_CEILING_NAMES)}"
        )
    try:
        parsed = int(number.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{name} needs an integer value") from None
    return name, parsed


def _ceilings(pairs: list[tuple[str, int]] | None) -> Ceilings | None:
    if not pairs:
        return None
    try:
        return Ceilings(**dict(pairs))
    except (ValueError, TypeError) as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None


def _load(path: str, ceilings: Ceilings | None) -> Any:
    try:
        return load_fixture(path, ceilings=ceilings)
    except FixtureError as exc:
        where = "" if exc.line is None else f" at line {exc.line}"
        message = f"{path}: rejected: {exc.reason}{where}"
    raise CLIError(message)


# -- commands ----------------------------------------------------------------------------


def _cmd_validate(args: argparse.Namespace) -> int:
    ceilings = _ceilings(args.ceiling)
    files: list[dict[str, Any]] = []
    for path in args.fixtures:
        rejections = iter_rejections(path, ceilings=ceilings)
        files.append(
            {
                "fixture": path,
                "valid": not rejections,
                "rejections": [{"reason": reason, "line": line} for reason, line in rejections],
            }
        )
    all_valid = all(entry["valid"] for entry in files)
    if args.json:
        _print_json({"valid": all_valid, "files": files})
    else:
        lines: list[str] = []
        for entry in files:
            for rejection in entry["rejections"]:
                line = rejection["line"]
                where = "" if line is None else f"{line}:"
                lines.append(f"{entry['fixture']}:{where} {rejection['reason']}")
        rejected = sum(1 for entry in files if not entry["valid"])
        count = sum(len(entry["rejections"]) for entry in files)
        lines.append(
            f"{_plural(len(files), 'file')} checked: {len(files) - rejected} valid, "
            f"{rejected} rejected ({_plural(count, 'rejection')})"
        )
        _write(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
    return EXIT_OK if all_valid else EXIT_INVALID


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _cmd_hash(args: argparse.Namespace) -> int:
    request = read_request_arg(args.request, args.vendor)
    label = _label(args.request)
    try:
        if args.canonical:
            data = canonical_request(request)
            # A terminal gets a newline for readability; a pipe gets the exact bytes, so
            # `replay-actor hash --canonical r.json | sha256sum` matches the hash.
            _write(data + b"\n" if sys.stdout.isatty() else data)
        else:
            _write(request_hash(request).encode("ascii") + b"\n")
    except RequestError as exc:
        raise CLIError(f"{label}: {exc}") from None
    return EXIT_OK


def _cmd_inspect(args: argparse.Namespace) -> int:
    fixture = _load(args.fixture, _ceilings(args.ceiling))
    _print_json(fixture.snapshot())
    return EXIT_OK


def _cmd_lookup(args: argparse.Namespace) -> int:
    ceilings = _ceilings(args.ceiling)
    request = read_request_arg(args.request, args.vendor)
    try:
        digest = request_hash(request)
    except RequestError as exc:
        raise CLIError(f"{_label(args.request)}: {exc}") from None
    fixture = _load(args.fixture, ceilings)
    # Opened before the answer is known, so a bad record path fails every time, not only
    # on the miss it was meant to catch.
    record = open_inspection_record(args.inspection) if args.inspection else None
    # Each CLI call is its own acquisition, so this is always its first call: a sequence
    # answers with its first element, and a non-empty sequence cannot be exhausted.
    outcome = Cursors(fixture).take(digest)
    try:
        if outcome is MISS:
            if record is not None:
                record.append("miss", digest, 1)
            print(str(ReplayMiss(None if args.private else digest)), file=sys.stderr)
            return EXIT_MISS
    finally:
        if record is not None:
            record.close()
    assert type(outcome) is bytes
    response = msgspec.json.decode(outcome)
    if args.compact:
        _write(canonical_json(response) + b"\n")
    else:
        _print_json(response)
    return EXIT_OK


def _cmd_stub(args: argparse.Namespace) -> int:
    if args.fixture is not None and args.request is None:
        raise CLIError(
            "stub: --fixture names whose request sidecar gets --request; give --request too",
            EXIT_USAGE,
        )
    canonical: bytes | None = None
    if args.request is not None:
        request = read_request_arg(args.request, args.vendor)
        try:
            digest = request_hash(request)
            if args.fixture is not None:
                canonical = canonical_request(request)
        except RequestError as exc:
            raise CLIError(f"{_label(args.request)}: {exc}") from None
        if args.request_hash is not None and args.request_hash != digest:
            raise CLIError("REQUEST_HASH is not the hash of --request", code=EXIT_USAGE)
        args.request_hash = digest
    elif args.request_hash is None:
        raise CLIError("give REQUEST_HASH or --request REQUEST.json", code=EXIT_USAGE)
    elif args.vendor is not None:
        raise CLIError("--from reads the file of --request", code=EXIT_USAGE)
    response = _response_arg(args)
    try:
        line = entry_line(args.request_hash, response=response)
    except (RequestError, ValueError) as exc:
        raise CLIError(f"cannot build the entry: {exc}") from None
    _check_line(line)
    if canonical is not None:
        print(_remember(args.fixture, args.request_hash, canonical), file=sys.stderr)
    _write(line + b"\n")
    return EXIT_OK


def _cmd_explain(args: argparse.Namespace) -> int:
    from .authoring.explain import explain_json, explain_text, find_nearest
    from .authoring.sidecar import sidecar_path

    ceilings = _ceilings(args.ceiling)
    request = read_request_arg(args.request, args.vendor)
    try:
        digest = request_hash(request)
    except RequestError as exc:
        raise CLIError(f"{_label(args.request)}: {exc}") from None
    fixture = _load(args.fixture, ceilings)
    hit = digest in fixture
    nearest = None
    if not hit:
        sidecar = sidecar_path(args.fixture)
        try:
            nearest = find_nearest(sidecar, request, known=fixture)
        except FileNotFoundError:
            raise CLIError(
                f"{args.fixture}: no request sidecar ({sidecar}) to explain the miss with: "
                "record the fixture, or give add/stub the request with --request"
            ) from None
        except OSError as exc:
            raise CLIError(f"{sidecar}: cannot read: {exc.strerror or exc}") from None
    if args.json:
        _print_json(explain_json(hit, digest, nearest))
    else:
        messages = len(request.get("messages") or [])
        text = explain_text(args.fixture, hit, digest, messages, nearest)
        _write(text.encode("utf-8", "surrogateescape"))
    return EXIT_OK if hit else EXIT_MISS


def _response_arg(args: argparse.Namespace) -> dict[str, Any]:
    """The response of ``--content`` or ``--response`` (stub, add)."""
    if args.response is None:
        return {"content": args.content}
    response = _read_json(args.response, "response")
    if type(response) is not dict:
        raise CLIError(f"{_label(args.response)}: the response must be a JSON object")
    return response


def _request_for(args: argparse.Namespace) -> bytes | None:
    """``--request``'s canonical bytes, checked against REQUEST_HASH; None without it."""
    if args.request is None:
        if args.vendor is not None:
            raise CLIError("--from reads the file of --request", code=EXIT_USAGE)
        return None
    request = read_request_arg(args.request, args.vendor)
    label = _label(args.request)
    try:
        canonical = canonical_request(request)
        digest = request_hash(request)
    except RequestError as exc:
        raise CLIError(f"{label}: {exc}") from None
    if digest != args.request_hash:
        raise CLIError(
            f"{label}: the request hashes to {digest}, not {args.request_hash}", EXIT_USAGE
        )
    return canonical


def _remember(fixture: str, request_hash: str, canonical: bytes) -> str:
    from .authoring.sidecar import SidecarWriter

    writer = SidecarWriter(fixture)
    added = writer.append(request_hash, canonical)
    if added:
        return f"added the request to {writer.path}"
    return f"the request was already in {writer.path}"


def _cmd_add(args: argparse.Namespace) -> int:
    from .authoring.add import add_response

    ceilings = _ceilings(args.ceiling)
    response = _response_arg(args)
    canonical = _request_for(args)
    try:
        added = add_response(args.fixture, args.request_hash, response, ceilings=ceilings)
    except FixtureError as exc:
        where = "" if exc.line is None else f" at line {exc.line}"
        raise CLIError(f"{args.fixture}: rejected: {exc.reason}{where}") from None
    except ValueError as exc:  # a response RFC 8785 cannot encode (RequestError too)
        raise CLIError(f"cannot build the entry: {exc}") from None
    if added.created:
        lines = [f"added {added.request_hash} to {args.fixture} (a single response)"]
    else:
        lines = [
            f"appended to {added.request_hash} in {args.fixture}: "
            f"a sequence of {added.responses} responses"
        ]
    if canonical is not None:
        lines.append(_remember(args.fixture, args.request_hash, canonical))
    _write(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
    return EXIT_OK


def _cmd_coverage(args: argparse.Namespace) -> int:
    from .authoring.coverage import coverage, coverage_text

    fixture = _load(args.fixture, _ceilings(args.ceiling))
    report = coverage(fixture, args.inspections)
    if report.served_events == 0:
        print(
            f"{PROG}: note: no record has served lines, so every entry looks unused; "
            "run with inspection_served=True (manifest: inspection_served = true)",
            file=sys.stderr,
            flush=True,
        )
    if args.json:
        _print_json(report.as_json())
    else:
        _write(coverage_text(args.fixture, report).encode("utf-8", "surrogateescape"))
    return EXIT_OK


def _check_line(line: bytes) -> None:
    """Prove the stub is a valid fixture line with the loader itself (default ceilings).

    ``entry_line`` guarantees the shape; the loader also enforces the ceilings (a
    response's size, nesting depth), which only it knows exactly.
    """
    with tempfile.TemporaryDirectory(prefix="replay-actor-stub-") as tmp:
        path = os.path.join(tmp, "stub.jsonl")
        with open(path, "wb") as handle:
            handle.write(line + b"\n")
        rejections = iter_rejections(path)
    if rejections:
        raise CLIError(f"the response cannot be stored in a fixture: {rejections[0][0]}")


# -- parser ------------------------------------------------------------------------------


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keep the hand-wrapped descriptions and examples as written."""


def _add_ceiling_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ceiling",
        metavar="NAME=N",
        type=_ceiling_arg,
        action="append",
        help=(
            "override one load ceiling, e.g. max_entries=10000 (repeatable); "
            f"names: {', '.join(_CEILING_NAMES)}"
        ),
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        formatter_class=_Formatter,
        description=(
            "Author and check replay-actor fixtures: validate them, hash requests, look\n"
            "responses up and write new entries. Nothing here contacts a network."
        ),
        epilog=(
            "exit codes: 0 success, 1 rejected fixture or invalid input, 2 usage error,\n"
            "            3 lookup or explain miss\n\n"
            "the authoring loop:\n"
            "  replay-actor lookup fixture.jsonl request.json        # miss: prints the hash\n"
            "  replay-actor explain fixture.jsonl request.json       # why: what differs\n"
            "  replay-actor add fixture.jsonl sha256:... --content 'hello' --request request.json\n"
            "  replay-actor validate fixture.jsonl"
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    validate = commands.add_parser(
        "validate",
        formatter_class=_Formatter,
        help="check fixture files and list every rejection",
        description=(
            "Check every line of each fixture and print each rejection as\n"
            "FIXTURE:LINE: REASON (FIXTURE: REASON for a rule about the whole file),\n"
            "then a summary. Only reason codes and line numbers are printed, never a\n"
            "line's content."
        ),
        epilog=(
            "example:\n"
            "  replay-actor validate fixtures/*.jsonl\n"
            "  replay-actor validate --json fixtures/baseline.jsonl\n\n"
            "exit: 0 every file valid, 1 any file rejected"
        ),
    )
    validate.add_argument("fixtures", nargs="+", metavar="FIXTURE", help="fixture file(s)")
    validate.add_argument(
        "--json",
        action="store_true",
        help='print {"valid", "files": [{"fixture", "valid", "rejections"}]} instead',
    )
    _add_ceiling_option(validate)
    validate.set_defaults(handler=_cmd_validate)

    hash_ = commands.add_parser(
        "hash",
        formatter_class=_Formatter,
        help="print a request's hash",
        description=(
            "Validate and normalise a provider-neutral request (a JSON object with\n"
            "'messages', optional 'tools', 'tool_choice', 'response_format', 'params')\n"
            "and print its request_hash, the key of its fixture entry."
        ),
        epilog=(
            "example:\n"
            "  replay-actor hash request.json\n"
            '  echo \'{"messages":[{"role":"user","content":"hi"}]}\' | '
            "replay-actor hash\n"
            "  replay-actor hash --canonical request.json | sha256sum\n"
            "  replay-actor hash --from openai body-from-a-log.json\n\n"
            "exit: 0 printed, 1 invalid request or unreadable input"
        ),
    )
    hash_.add_argument(
        "request",
        nargs="?",
        default=_STDIN,
        metavar="REQUEST.json",
        help="the request file, or - for stdin (the default)",
    )
    hash_.add_argument(
        "--canonical",
        action="store_true",
        help=(
            "print the canonical RFC 8785 bytes that are hashed instead (no trailing "
            "newline unless stdout is a terminal)"
        ),
    )
    _add_from_option(hash_)
    hash_.set_defaults(handler=_cmd_hash)

    inspect = commands.add_parser(
        "inspect",
        formatter_class=_Formatter,
        help="print a fixture's safe snapshot",
        description=(
            "Load a fixture and print its safe snapshot as JSON: the fixture-set hash,\n"
            "entry and response counts and the ceilings. No response content, no\n"
            "request hash, no path."
        ),
        epilog=(
            "example:\n  replay-actor inspect fixtures/baseline.jsonl\n\n"
            "exit: 0 printed, 1 fixture rejected"
        ),
    )
    inspect.add_argument("fixture", metavar="FIXTURE", help="fixture file")
    _add_ceiling_option(inspect)
    inspect.set_defaults(handler=_cmd_inspect)

    lookup = commands.add_parser(
        "lookup",
        formatter_class=_Formatter,
        help="print the response a fixture holds for a request",
        description=(
            "Answer one request from a fixture, as a fresh acquisition's first call\n"
            "would: a single entry's response, or the FIRST element of a 'responses'\n"
            "sequence (every CLI call is a new acquisition, so no cursor carries over).\n"
            "On a miss the exact miss message, with the hash to add, goes to stderr."
        ),
        epilog=(
            "example:\n"
            "  replay-actor lookup fixtures/baseline.jsonl request.json\n"
            "  replay-actor lookup --private --inspection misses.jsonl fx.jsonl - < req.json"
            "\n\nexit: 0 hit, 3 miss, 1 fixture rejected or invalid request"
        ),
    )
    lookup.add_argument("fixture", metavar="FIXTURE", help="fixture file")
    lookup.add_argument(
        "request",
        nargs="?",
        default=_STDIN,
        metavar="REQUEST.json",
        help="the request file, or - for stdin (the default)",
    )
    lookup.add_argument(
        "--private",
        action="store_true",
        help="private data: print no request hash (record it with --inspection instead)",
    )
    lookup.add_argument(
        "--inspection",
        metavar="PATH",
        help=(
            "append a miss as a JSON line {event, request_hash, call} to this owner-only "
            "file (created 0600, never through a symbolic link)"
        ),
    )
    lookup.add_argument(
        "--compact",
        action="store_true",
        help="print the response as one line of canonical JSON instead of indented",
    )
    _add_from_option(lookup)
    _add_ceiling_option(lookup)
    lookup.set_defaults(handler=_cmd_lookup)

    stub = commands.add_parser(
        "stub",
        formatter_class=_Formatter,
        help="print a fixture line for a request hash",
        description=(
            "Print one valid fixture line for REQUEST_HASH, ready to append to a\n"
            'fixture. --content TEXT stores the minimal response {"content": TEXT};\n'
            "--response FILE stores the JSON object in FILE as it is."
        ),
        epilog=(
            "example:\n"
            "  replay-actor stub sha256:<64 hex> --content 'Paris.' >> fixture.jsonl\n"
            "  replay-actor stub sha256:<64 hex> --response answer.json >> fixture.jsonl\n\n"
            "exit: 0 printed, 2 malformed hash, 1 unreadable or invalid response"
        ),
    )
    stub.add_argument(
        "request_hash",
        nargs="?",
        type=_hash_arg,
        metavar="REQUEST_HASH",
        help="sha256: followed by 64 lowercase hex digits (as `hash` or a miss prints it)",
    )
    stub.add_argument(
        "--request",
        metavar="REQUEST.json",
        help="take the hash from this request file (- for stdin) instead of REQUEST_HASH",
    )
    _add_from_option(stub)
    body = stub.add_mutually_exclusive_group(required=True)
    body.add_argument("--content", metavar="TEXT", help='store {"content": TEXT}')
    body.add_argument("--response", metavar="FILE", help="store this JSON object (- for stdin)")
    _add_fixture_option(stub)
    stub.set_defaults(handler=_cmd_stub)
    _add_authoring_commands(commands)
    return parser


def _add_fixture_option(stub: argparse.ArgumentParser) -> None:
    stub.add_argument(
        "--fixture",
        metavar="FIXTURE",
        help=(
            "with --request: the fixture the line is for; the request is added to its "
            "request sidecar (FIXTURE.requests.jsonl), for `explain`"
        ),
    )


def _add_authoring_commands(commands: Any) -> None:
    explain = commands.add_parser(
        "explain",
        formatter_class=_Formatter,
        help="say why a request misses: its nearest recorded request and what differs",
        description=(
            "Look a request up in FIXTURE; on a miss, find the nearest recorded request in\n"
            "FIXTURE's request sidecar (FIXTURE.requests.jsonl, written by record mode and\n"
            "by add/stub --request) -- most shared leading messages, then fewest differing\n"
            "JSON paths, then the smallest hash -- and print every path where the two\n"
            "differ, with the recorded and the requested value."
        ),
        epilog=(
            "example:\n"
            "  replay-actor explain fixture.jsonl request.json\n"
            "  replay-actor explain --json fixture.jsonl request.json\n\n"
            "exit: 0 hit, 3 miss, 1 no sidecar, rejected fixture or invalid request"
        ),
    )
    explain.add_argument("fixture", metavar="FIXTURE", help="fixture file")
    explain.add_argument("request", metavar="REQUEST.json", help="the request file, or - for stdin")
    _add_from_option(explain)
    explain.add_argument(
        "--json",
        action="store_true",
        help='print {"hit", "request_hash", "nearest": null | {"request_hash", "differences"}}',
    )
    _add_ceiling_option(explain)
    explain.set_defaults(handler=_cmd_explain)

    add = commands.add_parser(
        "add",
        formatter_class=_Formatter,
        help="add a response to a fixture (a new entry, or the next of a sequence)",
        description=(
            "Add a response for REQUEST_HASH to FIXTURE (created if absent). For a hash\n"
            "the fixture already holds, the response is appended to that entry: a single\n"
            "response becomes a 'responses' sequence. Every other line stays as it is;\n"
            "the file is replaced atomically, valid at every moment, under the fixture's\n"
            "lock (a concurrent add or recorder makes this one fail, changing nothing)."
        ),
        epilog=(
            "example:\n"
            '  replay-actor add fixture.jsonl "$(replay-actor hash request.json)" \\\n'
            "      --content 'Paris.' --request request.json\n\n"
            "exit: 0 added, 1 rejected fixture or invalid input or locked, 2 malformed hash"
        ),
    )
    add.add_argument("fixture", metavar="FIXTURE", help="fixture file (created if absent)")
    add.add_argument(
        "request_hash",
        type=_hash_arg,
        metavar="REQUEST_HASH",
        help="sha256: followed by 64 lowercase hex digits",
    )
    body = add.add_mutually_exclusive_group(required=True)
    body.add_argument("--content", metavar="TEXT", help='add {"content": TEXT}')
    body.add_argument("--response", metavar="FILE", help="add this JSON object (- for stdin)")
    add.add_argument(
        "--request",
        metavar="REQUEST.json",
        help="the request behind REQUEST_HASH (checked), added to the request sidecar",
    )
    _add_from_option(add)
    _add_ceiling_option(add)
    add.set_defaults(handler=_cmd_add)

    coverage = commands.add_parser(
        "coverage",
        formatter_class=_Formatter,
        help="which entries runs never used, sequences not consumed, requests that missed",
        description=(
            "Read the inspection records of one or more runs (acquired with an\n"
            "inspection_path and inspection_served=True) and list the fixture's entries\n"
            "no run used, the sequences no run consumed fully, and every missed hash."
        ),
        epilog=(
            "example:\n"
            "  replay-actor coverage fixture.jsonl runs/*.inspection.jsonl\n\n"
            "exit: 0 printed, 1 rejected fixture or unreadable record"
        ),
    )
    coverage.add_argument("fixture", metavar="FIXTURE", help="fixture file")
    coverage.add_argument(
        "inspections", nargs="+", metavar="INSPECTION", help="inspection record file(s)"
    )
    coverage.add_argument(
        "--json",
        action="store_true",
        help='print {"entries", "unused", "partly_consumed", "misses"} instead',
    )
    _add_ceiling_option(coverage)
    coverage.set_defaults(handler=_cmd_coverage)


# -- entry point -------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code (the console script exits with it)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error (code 2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except CLIError as exc:
        _error(str(exc))
        return exc.code
    except ReplayError as exc:
        # The library's messages name no payload and (in private mode) no hash; they
        # may name a path the user gave, as errors about files should.
        _error(str(exc))
        return EXIT_INVALID
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            return _broken_pipe()
        _error(exc.strerror or type(exc).__name__)
        return EXIT_INVALID
    except KeyboardInterrupt:
        return 130


def _broken_pipe() -> int:
    # The reader went away (`| head`): point stdout at /dev/null so the interpreter's
    # final flush does not raise again, and exit quietly as other Unix tools do.
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)
    return EXIT_INVALID
