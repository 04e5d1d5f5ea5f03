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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from ._canonical import canonical_json
from ._errors import FixtureError, ReplayError, ReplayMiss, RequestError
from ._request import canonical_request, request_hash
from ._strict_json import NotStrictJSON, loads_strict
from ._version import __version__
from .files.sidecar import SidecarWriter, sidecar_path
from .fixture import MISS, Ceilings, Cursors, entry_line, iter_rejections, load_fixture
from .replay.inspection import open_inspection_record
from .vendors import make_vendor, vendor_names

__all__ = [
    "COMMANDS",
    "EXIT_INVALID",
    "EXIT_MISS",
    "EXIT_OK",
    "EXIT_USAGE",
    "VENDORS",
    "Arg",
    "Command",
    "OneOf",
    "build_parser",
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


# -- the command table -------------------------------------------------------------------
#
# Each subcommand is one ``Command`` record, written next to its handler: its name, help,
# description and epilog, its arguments (``Arg``, or ``OneOf`` for a mutually exclusive
# group) and the handler. ``build_parser`` loops over ``COMMANDS``; nothing else knows
# the list of commands.


@dataclass(frozen=True)
class Arg:
    """One ``add_argument`` call: its names and keyword options."""

    names: tuple[str, ...]
    options: Mapping[str, Any]


def _arg(*names: str, **options: Any) -> Arg:
    return Arg(names, options)


@dataclass(frozen=True)
class OneOf:
    """A mutually exclusive group of arguments."""

    args: tuple[Arg, ...]
    required: bool = True


@dataclass(frozen=True)
class Command:
    """A subcommand: what ``--help`` says about it, its arguments, its handler."""

    name: str
    help: str
    description: str
    epilog: str
    arguments: tuple[Arg | OneOf, ...]
    handler: Callable[[argparse.Namespace], int]


# -- arguments shared by several commands ------------------------------------------------


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


_CEILING: Final = _arg(
    "--ceiling",
    metavar="NAME=N",
    type=_ceiling_arg,
    action="append",
    help=(
        "override one load ceiling, e.g. max_entries=10000 (repeatable); "
        f"names: {', '.join(_CEILING_NAMES)}"
    ),
)
_FROM: Final = _arg(
    "--from",
    dest="vendor",
    choices=VENDORS,
    default=None,
    help=(
        "the request file is this vendor's request body (chat completions or "
        "messages), read as the SDK transports read it"
    ),
)
_FIXTURE: Final = _arg("fixture", metavar="FIXTURE", help="fixture file")
_REQUEST_OR_STDIN: Final = _arg(
    "request",
    nargs="?",
    default=_STDIN,
    metavar="REQUEST.json",
    help="the request file, or - for stdin (the default)",
)


def _body(verb: str) -> OneOf:
    """``--content TEXT`` or ``--response FILE`` (stub, add)."""
    return OneOf(
        (
            _arg("--content", metavar="TEXT", help=f'{verb} {{"content": TEXT}}'),
            _arg("--response", metavar="FILE", help=f"{verb} this JSON object (- for stdin)"),
        )
    )


def _hash_of(request: Any, label: str) -> str:
    try:
        return request_hash(request)
    except RequestError as exc:
        raise CLIError(f"{label}: {exc}") from None


def _response_arg(args: argparse.Namespace) -> dict[str, Any]:
    """The response of ``--content`` or ``--response`` (stub, add)."""
    if args.response is None:
        return {"content": args.content}
    response = _read_json(args.response, "response")
    if type(response) is not dict:
        raise CLIError(f"{_label(args.response)}: the response must be a JSON object")
    return response


# -- validate ----------------------------------------------------------------------------


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _validation_text(files: list[dict[str, Any]]) -> str:
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
    return "\n".join(lines) + "\n"


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
        _write(_validation_text(files).encode("utf-8", "surrogateescape"))
    return EXIT_OK if all_valid else EXIT_INVALID


VALIDATE: Final = Command(
    name="validate",
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
    arguments=(
        _arg("fixtures", nargs="+", metavar="FIXTURE", help="fixture file(s)"),
        _arg(
            "--json",
            action="store_true",
            help='print {"valid", "files": [{"fixture", "valid", "rejections"}]} instead',
        ),
        _CEILING,
    ),
    handler=_cmd_validate,
)


# -- hash --------------------------------------------------------------------------------


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


HASH: Final = Command(
    name="hash",
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
    arguments=(
        _REQUEST_OR_STDIN,
        _arg(
            "--canonical",
            action="store_true",
            help=(
                "print the canonical RFC 8785 bytes that are hashed instead (no trailing "
                "newline unless stdout is a terminal)"
            ),
        ),
        _FROM,
    ),
    handler=_cmd_hash,
)


# -- inspect -----------------------------------------------------------------------------


def _cmd_inspect(args: argparse.Namespace) -> int:
    fixture = _load(args.fixture, _ceilings(args.ceiling))
    _print_json(fixture.snapshot())
    return EXIT_OK


INSPECT: Final = Command(
    name="inspect",
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
    arguments=(_FIXTURE, _CEILING),
    handler=_cmd_inspect,
)


# -- lookup ------------------------------------------------------------------------------


def _cmd_lookup(args: argparse.Namespace) -> int:
    ceilings = _ceilings(args.ceiling)
    request = read_request_arg(args.request, args.vendor)
    digest = _hash_of(request, _label(args.request))
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


LOOKUP: Final = Command(
    name="lookup",
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
    arguments=(
        _FIXTURE,
        _REQUEST_OR_STDIN,
        _arg(
            "--private",
            action="store_true",
            help="private data: print no request hash (record it with --inspection instead)",
        ),
        _arg(
            "--inspection",
            metavar="PATH",
            help=(
                "append a miss as a JSON line {event, request_hash, call} to this owner-only "
                "file (created 0600, never through a symbolic link)"
            ),
        ),
        _arg(
            "--compact",
            action="store_true",
            help="print the response as one line of canonical JSON instead of indented",
        ),
        _FROM,
        _CEILING,
    ),
    handler=_cmd_lookup,
)


# -- stub --------------------------------------------------------------------------------


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


def _stub_request(args: argparse.Namespace) -> bytes | None:
    """Set ``args.request_hash`` from ``--request`` (checked against REQUEST_HASH if both
    are given); the request's canonical bytes when ``--fixture`` wants them."""
    if args.fixture is not None and args.request is None:
        raise CLIError(
            "stub: --fixture names whose request sidecar gets --request; give --request too",
            EXIT_USAGE,
        )
    if args.request is None:
        if args.request_hash is None:
            raise CLIError("give REQUEST_HASH or --request REQUEST.json", code=EXIT_USAGE)
        if args.vendor is not None:
            raise CLIError("--from reads the file of --request", code=EXIT_USAGE)
        return None
    request = read_request_arg(args.request, args.vendor)
    canonical: bytes | None = None
    try:
        digest = request_hash(request)
        if args.fixture is not None:
            canonical = canonical_request(request)
    except RequestError as exc:
        raise CLIError(f"{_label(args.request)}: {exc}") from None
    if args.request_hash is not None and args.request_hash != digest:
        raise CLIError("REQUEST_HASH is not the hash of --request", code=EXIT_USAGE)
    args.request_hash = digest
    return canonical


def _cmd_stub(args: argparse.Namespace) -> int:
    canonical = _stub_request(args)
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


STUB: Final = Command(
    name="stub",
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
    arguments=(
        _arg(
            "request_hash",
            nargs="?",
            type=_hash_arg,
            metavar="REQUEST_HASH",
            help="sha256: followed by 64 lowercase hex digits (as `hash` or a miss prints it)",
        ),
        _arg(
            "--request",
            metavar="REQUEST.json",
            help="take the hash from this request file (- for stdin) instead of REQUEST_HASH",
        ),
        _FROM,
        _body("store"),
        _arg(
            "--fixture",
            metavar="FIXTURE",
            help=(
                "with --request: the fixture the line is for; the request is added to its "
                "request sidecar (FIXTURE.requests.jsonl), for `explain`"
            ),
        ),
    ),
    handler=_cmd_stub,
)


# -- explain -----------------------------------------------------------------------------


def _nearest_for(fixture_path: str, request: Any, fixture: Any) -> Any:
    """The nearest recorded request in the fixture's sidecar (no cap: asked for)."""
    from .authoring.nearest import find_nearest

    sidecar = sidecar_path(fixture_path)
    try:
        return find_nearest(sidecar, request, known=fixture)
    except FileNotFoundError:
        raise CLIError(
            f"{fixture_path}: no request sidecar ({sidecar}) to explain the miss with: "
            "record the fixture, or give add/stub the request with --request"
        ) from None
    except OSError as exc:
        raise CLIError(f"{sidecar}: cannot read: {exc.strerror or exc}") from None


def _cmd_explain(args: argparse.Namespace) -> int:
    from .authoring.present import explain_json, explain_text

    ceilings = _ceilings(args.ceiling)
    request = read_request_arg(args.request, args.vendor)
    digest = _hash_of(request, _label(args.request))
    fixture = _load(args.fixture, ceilings)
    hit = digest in fixture
    nearest = None if hit else _nearest_for(args.fixture, request, fixture)
    if args.json:
        _print_json(explain_json(hit, digest, nearest))
    else:
        messages = len(request.get("messages") or [])
        text = explain_text(args.fixture, hit, digest, messages, nearest)
        _write(text.encode("utf-8", "surrogateescape"))
    return EXIT_OK if hit else EXIT_MISS


EXPLAIN: Final = Command(
    name="explain",
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
    arguments=(
        _FIXTURE,
        _arg("request", metavar="REQUEST.json", help="the request file, or - for stdin"),
        _FROM,
        _arg(
            "--json",
            action="store_true",
            help='print {"hit", "request_hash", "nearest": null | {"request_hash", "differences"}}',
        ),
        _CEILING,
    ),
    handler=_cmd_explain,
)


# -- add ---------------------------------------------------------------------------------


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
    writer = SidecarWriter(fixture)
    added = writer.append(request_hash, canonical)
    if added:
        return f"added the request to {writer.path}"
    return f"the request was already in {writer.path}"


def _add(args: argparse.Namespace, response: dict[str, Any]) -> Any:
    from .authoring.add import add_response

    try:
        return add_response(
            args.fixture, args.request_hash, response, ceilings=_ceilings(args.ceiling)
        )
    except FixtureError as exc:
        where = "" if exc.line is None else f" at line {exc.line}"
        raise CLIError(f"{args.fixture}: rejected: {exc.reason}{where}") from None
    except ValueError as exc:  # a response RFC 8785 cannot encode (RequestError too)
        raise CLIError(f"cannot build the entry: {exc}") from None


def _cmd_add(args: argparse.Namespace) -> int:
    _ceilings(args.ceiling)  # a bad --ceiling is a usage error before anything else
    response = _response_arg(args)
    canonical = _request_for(args)
    if canonical is not None:
        # Refused before the fixture changes: a sidecar that cannot take the request
        # (a directory, a symbolic link) must not leave a fixture added to and a failure.
        SidecarWriter(args.fixture).check()
    added = _add(args, response)
    if added.created:
        lines = [f"added {added.request_hash} to {args.fixture} (a single response)"]
    else:
        lines = [
            f"appended to {added.request_hash} in {args.fixture}: "
            f"a sequence of {added.responses} responses"
        ]
    if canonical is not None:
        try:
            lines.append(_remember(args.fixture, args.request_hash, canonical))
        except (ReplayError, OSError) as exc:
            # Checked above, so only a change meanwhile gets here. The fixture is already
            # changed: failing now would make a rerun add the response twice.
            message = getattr(exc, "strerror", None) or str(exc)
            print(
                f"{PROG}: warning: the response was added, but not the request to the "
                f"sidecar: {message}",
                file=sys.stderr,
                flush=True,
            )
    _write(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
    return EXIT_OK


ADD: Final = Command(
    name="add",
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
    arguments=(
        _arg("fixture", metavar="FIXTURE", help="fixture file (created if absent)"),
        _arg(
            "request_hash",
            type=_hash_arg,
            metavar="REQUEST_HASH",
            help="sha256: followed by 64 lowercase hex digits",
        ),
        _body("add"),
        _arg(
            "--request",
            metavar="REQUEST.json",
            help="the request behind REQUEST_HASH (checked), added to the request sidecar",
        ),
        _FROM,
        _CEILING,
    ),
    handler=_cmd_add,
)


# -- coverage ----------------------------------------------------------------------------


def _note(message: str) -> None:
    print(f"{PROG}: note: {message}", file=sys.stderr, flush=True)


def _cmd_coverage(args: argparse.Namespace) -> int:
    from .authoring.coverage import coverage, coverage_text

    fixture = _load(args.fixture, _ceilings(args.ceiling))
    report = coverage(fixture, args.inspections)
    if report.served_events == 0:
        _note(
            "no record has served lines, so every entry looks unused; "
            "run with inspection_served=True (manifest: inspection_served = true)"
        )
    if report.skipped_lines:
        _note(
            f"skipped {_plural(report.skipped_lines, 'record line')} whose request_hash is "
            "not 'sha256:' and 64 lowercase hexadecimal digits"
        )
    if args.json:
        _print_json(report.as_json())
    else:
        _write(coverage_text(args.fixture, report).encode("utf-8", "surrogateescape"))
    return EXIT_OK


COVERAGE: Final = Command(
    name="coverage",
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
    arguments=(
        _FIXTURE,
        _arg("inspections", nargs="+", metavar="INSPECTION", help="inspection record file(s)"),
        _arg(
            "--json",
            action="store_true",
            help='print {"entries", "unused", "partly_consumed", "misses"} instead',
        ),
        _CEILING,
    ),
    handler=_cmd_coverage,
)


# -- the front door: serve, run (docs/front-door.md) ----------------------------------------

_EPILOG_SERVE: Final = (
    "prints one JSON line when ready:\n"
    '  {"url", "openai_base_url", "anthropic_base_url", "gemini_base_url", "token"}\n'
    "every request must carry the token (Authorization: Bearer, x-api-key or\n"
    "x-goog-api-key). Runs until SIGINT/SIGTERM, then releases the provider: exit 0."
)
_EPILOG_RUN: Final = (
    "COMMAND gets OPENAI_BASE_URL, OPENAI_API_BASE, ANTHROPIC_BASE_URL and\n"
    "GOOGLE_GEMINI_BASE_URL pointing at the front door, and OPENAI_API_KEY,\n"
    "ANTHROPIC_API_KEY and GEMINI_API_KEY set to the run's token; the manifest's real\n"
    "key never reaches it.\n\n"
    "example:\n"
    "  replay-actor run eval.toml -- python my_eval.py\n\n"
    "exit: COMMAND's status (128+N if it died of signal N); 127 not found; 1 bad manifest"
)


_FRONT_DOOR_ADDRESS: Final = (
    _arg("manifest", metavar="MANIFEST", help="the manifest (TOML file)"),
    _arg("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, loopback only)"),
    _arg("--port", type=int, default=0, help="port to bind (default: 0, any free port)"),
)


def _cmd_serve(args: argparse.Namespace) -> int:
    from .frontdoor.commands import cmd_serve

    return cmd_serve(args)


def _cmd_run(args: argparse.Namespace) -> int:
    from .frontdoor.commands import cmd_run

    return cmd_run(args)


SERVE: Final = Command(
    name="serve",
    help="serve every vendor API over local HTTP from one acquisition",
    description=(
        "Serve the OpenAI (chat, Responses), Anthropic and Gemini APIs over HTTP from\n"
        "the manifest's provider (replay, live or record), owned by this process."
    ),
    epilog=_EPILOG_SERVE,
    arguments=_FRONT_DOOR_ADDRESS,
    handler=_cmd_serve,
)
RUN: Final = Command(
    name="run",
    help="run COMMAND with every vendor SDK pointed at a front door",
    description=(
        "Start the front door for the manifest's provider in this process and run\n"
        "COMMAND with its environment pointed at it: any application, any language,\n"
        "no code changed."
    ),
    epilog=_EPILOG_RUN,
    arguments=(
        *_FRONT_DOOR_ADDRESS,
        _arg(
            "command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...]", help="the command"
        ),
    ),
    handler=_cmd_run,
)


#: Every subcommand, in the order ``--help`` lists them.
COMMANDS: Final = (VALIDATE, HASH, INSPECT, LOOKUP, STUB, EXPLAIN, ADD, COVERAGE, SERVE, RUN)


# -- parser ------------------------------------------------------------------------------


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keep the hand-wrapped descriptions and examples as written."""


def _add_arguments(parser: argparse.ArgumentParser, arguments: tuple[Arg | OneOf, ...]) -> None:
    for argument in arguments:
        if isinstance(argument, OneOf):
            group = parser.add_mutually_exclusive_group(required=argument.required)
            for member in argument.args:
                group.add_argument(*member.names, **member.options)
        else:
            parser.add_argument(*argument.names, **argument.options)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser: one subparser per record of ``COMMANDS``."""
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
    for command in COMMANDS:
        sub = commands.add_parser(
            command.name,
            formatter_class=_Formatter,
            help=command.help,
            description=command.description,
            epilog=command.epilog,
        )
        _add_arguments(sub, command.arguments)
        sub.set_defaults(handler=command.handler)
    return parser


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
