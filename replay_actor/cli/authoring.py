"""The authoring commands: ``stub``, ``explain``, ``add``, ``remove``, ``coverage`` (docs/cli.md,
docs/authoring.md): write an entry for a missing request, say why a request misses, and
read what runs used. The work is ``authoring/``'s and ``files/``'s; this module reads the
arguments and prints.

Runs in: the ``replay-actor`` process, without a cursor actor.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import TYPE_CHECKING, Any, Final

from .._errors import FixtureError, ReplayError, RequestError
from .._request import canonical_request, request_hash
from ..files.sidecar import SidecarWriter, sidecar_path
from ..fixture import entry_line, iter_rejections
from ._shared import (
    EXIT_MISS,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    CLIError,
    Command,
    OneOf,
    arg,
    body_args,
    ceiling_arg,
    ceilings,
    fixture_arg,
    from_arg,
    hash_arg,
    hash_of,
    label,
    load,
    note,
    plural,
    print_json,
    read_request_arg,
    response_arg,
    write,
)

if TYPE_CHECKING:
    from ..authoring.add import Added, OnExisting
    from ..authoring.nearest import Nearest
    from ..fixture import FixtureSet

__all__ = ["ADD", "COVERAGE", "EXPLAIN", "REMOVE", "STUB"]


def _remember(fixture: str, digest: str, canonical: bytes) -> str:
    """Add the request to the fixture's sidecar; say so (stub, add)."""
    writer = SidecarWriter(fixture)
    added = writer.append(digest, canonical)
    if added:
        return f"added the request to {writer.path}"
    return f"the request was already in {writer.path}"


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
        raise CLIError(f"{label(args.request)}: {exc}") from None
    if args.request_hash is not None and args.request_hash != digest:
        raise CLIError("REQUEST_HASH is not the hash of --request", code=EXIT_USAGE)
    args.request_hash = digest
    return canonical


def _cmd_stub(args: argparse.Namespace) -> int:
    canonical = _stub_request(args)
    response = response_arg(args)
    try:
        line = entry_line(args.request_hash, response=response)
    except (RequestError, ValueError) as exc:
        raise CLIError(f"cannot build the entry: {exc}") from None
    _check_line(line)
    if canonical is not None:
        print(_remember(args.fixture, args.request_hash, canonical), file=sys.stderr)
    write(line + b"\n")
    return EXIT_OK


STUB: Final = Command(
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
        arg(
            "request_hash",
            nargs="?",
            type=hash_arg,
            metavar="REQUEST_HASH",
            help="sha256: followed by 64 lowercase hex digits (as `hash` or a miss prints it)",
        ),
        arg(
            "--request",
            metavar="REQUEST.json",
            help="take the hash from this request file (- for stdin) instead of REQUEST_HASH",
        ),
        from_arg(),
        body_args("store"),
        arg(
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


def _nearest_for(fixture_path: str, request: Any, fixture: FixtureSet) -> Nearest | None:
    """The nearest recorded request in the fixture's sidecar (no cap: asked for)."""
    from ..authoring.nearest import find_nearest

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


def _saved_request(fixture_path: str, digest: str) -> Any:
    """The request the fixture's sidecar holds for ``digest`` (``explain HASH``)."""
    from ..files.sidecar import find_request

    sidecar = sidecar_path(fixture_path)
    try:
        request = find_request(sidecar, digest)
    except FileNotFoundError:
        request = None
    except OSError as exc:
        raise CLIError(f"{sidecar}: cannot read: {exc.strerror or exc}") from None
    if request is None:
        raise CLIError(
            f"{sidecar} holds no request for {digest}: give the request file instead "
            "(`replay-actor run` saves each missed request there)"
        )
    return request


def _explained_request(args: argparse.Namespace) -> Any:
    """The request ``explain`` is about: a file, stdin, or a hash from the sidecar."""
    source: str = args.request
    if source.startswith("sha256:") and not os.path.exists(source):
        try:
            digest = hash_arg(source)
        except argparse.ArgumentTypeError as exc:
            raise CLIError(f"{source[:80]!r}: {exc}", EXIT_USAGE) from None
        if args.vendor is not None:
            raise CLIError("--from reads a request file, not a hash", EXIT_USAGE)
        return _saved_request(args.fixture, digest)
    return read_request_arg(source, args.vendor)


def _cmd_explain(args: argparse.Namespace) -> int:
    from ..authoring.present import explain_json, explain_text

    limits = ceilings(args.ceiling)
    request = _explained_request(args)
    digest = hash_of(request, label(args.request))
    fixture = load(args.fixture, limits)
    hit = digest in fixture
    nearest = None if hit else _nearest_for(args.fixture, request, fixture)
    if args.json:
        print_json(explain_json(hit, digest, nearest))
    else:
        messages = len(request.get("messages") or [])
        text = explain_text(args.fixture, hit, digest, messages, nearest)
        write(text.encode("utf-8", "surrogateescape"))
    return EXIT_OK if hit else EXIT_MISS


EXPLAIN: Final = Command(
    description=(
        "Look a request up in FIXTURE; on a miss, find the nearest recorded request in\n"
        "FIXTURE's request sidecar (FIXTURE.requests.jsonl, written by record mode and\n"
        "by add/stub --request) -- most shared leading messages, then fewest differing\n"
        "JSON paths, then the smallest hash -- and print every path where the two\n"
        "differ, with the recorded and the requested value. REQUEST may be a\n"
        "request hash whose request the sidecar holds (`run` saves every miss there)."
    ),
    epilog=(
        "example:\n"
        "  replay-actor explain fixture.jsonl request.json\n"
        "  replay-actor explain fixture.jsonl sha256:<64 hex>   # a miss `run` printed\n"
        "  replay-actor explain --json fixture.jsonl request.json\n\n"
        "exit: 0 hit, 3 miss, 1 no sidecar, rejected fixture or invalid request"
    ),
    arguments=(
        fixture_arg(),
        arg(
            "request",
            metavar="REQUEST",
            help="the request file, - for stdin, or a request hash the sidecar holds",
        ),
        from_arg(),
        arg(
            "--json",
            action="store_true",
            help='print {"hit", "request_hash", "nearest": null | {"request_hash", "differences"}}',
        ),
        ceiling_arg(),
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
    name = label(args.request)
    try:
        canonical = canonical_request(request)
        digest = request_hash(request)
    except RequestError as exc:
        raise CLIError(f"{name}: {exc}") from None
    if digest != args.request_hash:
        raise CLIError(
            f"{name}: the request hashes to {digest}, not {args.request_hash}", EXIT_USAGE
        )
    return canonical


def _add(args: argparse.Namespace, response: dict[str, Any]) -> Added:
    from ..authoring.add import add_response

    on_existing: OnExisting = "next" if args.next else "replace" if args.replace else "refuse"
    try:
        return add_response(
            args.fixture,
            args.request_hash,
            response,
            ceilings=ceilings(args.ceiling),
            on_existing=on_existing,
        )
    except FixtureError as exc:
        where = "" if exc.line is None else f" at line {exc.line}"
        raise CLIError(f"{args.fixture}: rejected: {exc.reason}{where}") from None
    except ValueError as exc:  # a response RFC 8785 cannot encode (RequestError too)
        raise CLIError(f"cannot build the entry: {exc}") from None


def _cmd_add(args: argparse.Namespace) -> int:
    ceilings(args.ceiling)  # a bad --ceiling is a usage error before anything else
    response = response_arg(args)
    canonical = _request_for(args)
    if canonical is not None:
        # Refused before the fixture changes: a sidecar that cannot take the request
        # (a directory, a symbolic link) must not leave a fixture added to and a failure.
        SidecarWriter(args.fixture).check()
    added = _add(args, response)
    if added.created:
        lines = [f"added {added.request_hash} to {args.fixture} (a single response)"]
    elif added.replaced:
        lines = [f"replaced {added.request_hash} in {args.fixture} (now a single response)"]
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
    write(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
    return EXIT_OK


ADD: Final = Command(
    description=(
        "Add a response for REQUEST_HASH to FIXTURE (created if absent). A hash the\n"
        "fixture already holds is refused unless told: --next appends the response to\n"
        "that entry (a single response becomes a 'responses' sequence), --replace\n"
        "replaces the entry with this response alone. Every other line stays as it is;\n"
        "the file is replaced atomically, valid at every moment, under the fixture's\n"
        "lock (a concurrent add or recorder makes this one fail, changing nothing)."
    ),
    epilog=(
        "example:\n"
        '  replay-actor add fixture.jsonl "$(replay-actor hash request.json)" \\\n'
        "      --content 'Paris.' --request request.json\n"
        "  replay-actor add fixture.jsonl sha256:<64 hex> --next --content 'Lisbon.'\n\n"
        "exit: 0 added, 1 already there (without --next/--replace), rejected fixture,\n"
        "invalid input or locked, 2 malformed hash"
    ),
    arguments=(
        arg("fixture", metavar="FIXTURE", help="fixture file (created if absent)"),
        arg(
            "request_hash",
            type=hash_arg,
            metavar="REQUEST_HASH",
            help="sha256: followed by 64 lowercase hex digits",
        ),
        body_args("add"),
        OneOf(
            (
                arg(
                    "--next",
                    action="store_true",
                    help="for a hash already there: append the response to its sequence",
                ),
                arg(
                    "--replace",
                    action="store_true",
                    help="for a hash already there: replace its entry with this response",
                ),
            ),
            required=False,
        ),
        arg(
            "--request",
            metavar="REQUEST.json",
            help="the request behind REQUEST_HASH (checked), added to the request sidecar",
        ),
        from_arg(),
        ceiling_arg(),
    ),
    handler=_cmd_add,
)


# -- remove ------------------------------------------------------------------------------


def _cmd_remove(args: argparse.Namespace) -> int:
    from ..authoring.add import remove_entry

    try:
        held = remove_entry(args.fixture, args.request_hash, ceilings=ceilings(args.ceiling))
    except FixtureError as exc:
        where = "" if exc.line is None else f" at line {exc.line}"
        raise CLIError(f"{args.fixture}: rejected: {exc.reason}{where}") from None
    what = "a single response" if held == 1 else f"a sequence of {held} responses"
    write(f"removed {args.request_hash} from {args.fixture} ({what})\n".encode())
    return EXIT_OK


REMOVE: Final = Command(
    description=(
        "Remove REQUEST_HASH's entry (its single response or its whole sequence) from\n"
        "FIXTURE. Every other line stays as it is; the file is replaced atomically\n"
        "under the fixture's lock, as add does. The request sidecar keeps its line\n"
        "(explain considers only the fixture's entries)."
    ),
    epilog=(
        "example:\n"
        "  replay-actor remove fixture.jsonl sha256:<64 hex>\n\n"
        "exit: 0 removed, 1 no such entry, no fixture, rejected or locked, "
        "2 malformed hash"
    ),
    arguments=(
        fixture_arg(),
        arg(
            "request_hash",
            type=hash_arg,
            metavar="REQUEST_HASH",
            help="sha256: followed by 64 lowercase hex digits",
        ),
        ceiling_arg(),
    ),
    handler=_cmd_remove,
)


# -- coverage ----------------------------------------------------------------------------


def _cmd_coverage(args: argparse.Namespace) -> int:
    from ..authoring.coverage import coverage, coverage_text

    fixture = load(args.fixture, ceilings(args.ceiling))
    report = coverage(fixture, args.inspections)
    if report.served_events == 0:
        note(
            "no record has served lines, so every entry looks unused; "
            "run with inspection_served=True (manifest: inspection_served = true)"
        )
    if report.skipped_lines:
        note(
            f"skipped {plural(report.skipped_lines, 'record line')} whose request_hash is "
            "not 'sha256:' and 64 lowercase hexadecimal digits"
        )
    if args.json:
        print_json(report.as_json())
    else:
        write(coverage_text(args.fixture, report).encode("utf-8", "surrogateescape"))
    return EXIT_OK


COVERAGE: Final = Command(
    description=(
        "Read the inspection records of one or more runs (acquired with an\n"
        "inspection_path and inspection_served=True) and list the fixture's entries\n"
        "no run used, the sequences no run consumed fully, every missed hash and\n"
        "every sequence a run asked past its end (exhausted)."
    ),
    epilog=(
        "example:\n"
        "  replay-actor coverage fixture.jsonl runs/*.inspection.jsonl\n\n"
        "exit: 0 printed, 1 rejected fixture or unreadable record"
    ),
    arguments=(
        fixture_arg(),
        arg("inspections", nargs="+", metavar="INSPECTION", help="inspection record file(s)"),
        arg(
            "--json",
            action="store_true",
            help=('print {"entries", "unused", "partly_consumed", "misses", "exhausted"} instead'),
        ),
        ceiling_arg(),
    ),
    handler=_cmd_coverage,
)
