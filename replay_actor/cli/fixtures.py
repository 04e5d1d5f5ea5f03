"""The commands that read a fixture or a request and change nothing: ``validate``,
``hash``, ``inspect``, ``lookup`` (docs/cli.md).

Runs in: the ``replay-actor`` process, without a cursor actor: ``lookup`` answers as a
fresh acquisition's first call would, from the table itself (``fixture/``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Final

import msgspec

from .._canonical import canonical_json
from .._errors import ReplayMiss, RequestError
from ..fixture import MISS, Cursors, iter_rejections
from ._shared import (
    EXIT_INVALID,
    EXIT_MISS,
    EXIT_OK,
    CLIError,
    Command,
    arg,
    ceiling_arg,
    ceilings,
    fixture_arg,
    from_arg,
    hash_of,
    label,
    load,
    note,
    plural,
    print_json,
    read_request_arg,
    request_or_stdin_arg,
    write,
)

__all__ = ["HASH", "INSPECT", "LOOKUP", "VALIDATE"]


# -- validate ----------------------------------------------------------------------------


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
        f"{plural(len(files), 'file')} checked: {len(files) - rejected} valid, "
        f"{rejected} rejected ({plural(count, 'rejection')})"
    )
    return "\n".join(lines) + "\n"


def _cmd_validate(args: argparse.Namespace) -> int:
    limits = ceilings(args.ceiling)
    files: list[dict[str, Any]] = []
    for path in args.fixtures:
        rejections = iter_rejections(path, ceilings=limits)
        files.append(
            {
                "fixture": path,
                "valid": not rejections,
                "rejections": [{"reason": reason, "line": line} for reason, line in rejections],
            }
        )
    all_valid = all(entry["valid"] for entry in files)
    if args.json:
        print_json({"valid": all_valid, "files": files})
    else:
        write(_validation_text(files).encode("utf-8", "surrogateescape"))
    return EXIT_OK if all_valid else EXIT_INVALID


VALIDATE: Final = Command(
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
        arg("fixtures", nargs="+", metavar="FIXTURE", help="fixture file(s)"),
        arg(
            "--json",
            action="store_true",
            help='print {"valid", "files": [{"fixture", "valid", "rejections"}]} instead',
        ),
        ceiling_arg(),
    ),
    handler=_cmd_validate,
)


# -- hash --------------------------------------------------------------------------------


def _cmd_hash(args: argparse.Namespace) -> int:
    from .._request import canonical_request, request_hash  # validate never hashes

    request = read_request_arg(args.request, args.vendor)
    try:
        if args.canonical:
            data = canonical_request(request)
            # A terminal gets a newline for readability; a pipe gets the exact bytes, so
            # `replay-actor hash --canonical r.json | sha256sum` matches the hash.
            write(data + b"\n" if sys.stdout.isatty() else data)
        else:
            write(request_hash(request).encode("ascii") + b"\n")
    except RequestError as exc:
        raise CLIError(f"{label(args.request)}: {exc}") from None
    return EXIT_OK


HASH: Final = Command(
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
        request_or_stdin_arg(),
        arg(
            "--canonical",
            action="store_true",
            help=(
                "print the canonical RFC 8785 bytes that are hashed instead (no trailing "
                "newline unless stdout is a terminal)"
            ),
        ),
        from_arg(),
    ),
    handler=_cmd_hash,
)


# -- inspect -----------------------------------------------------------------------------


def _cmd_inspect(args: argparse.Namespace) -> int:
    fixture = load(args.fixture, ceilings(args.ceiling))
    print_json(fixture.snapshot())
    return EXIT_OK


INSPECT: Final = Command(
    description=(
        "Load a fixture and print its safe snapshot as JSON: the fixture-set hash,\n"
        "entry and response counts and the ceilings. No response content, no\n"
        "request hash, no path."
    ),
    epilog=(
        "example:\n  replay-actor inspect fixtures/baseline.jsonl\n\n"
        "exit: 0 printed, 1 fixture rejected"
    ),
    arguments=(fixture_arg(), ceiling_arg()),
    handler=_cmd_inspect,
)


# -- lookup ------------------------------------------------------------------------------


def _cmd_lookup(args: argparse.Namespace) -> int:
    # The one import from replay/: the inspection record's format is the actor's.
    from ..replay.io.inspection import open_inspection_record

    limits = ceilings(args.ceiling)
    request = read_request_arg(args.request, args.vendor)
    digest = hash_of(request, label(args.request))
    fixture = load(args.fixture, limits)
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
            if args.private:
                note(_withheld(args.inspection))
            return EXIT_MISS
    finally:
        if record is not None:
            record.close()
    assert type(outcome) is bytes
    _print_response(outcome, compact=args.compact)
    return EXIT_OK


def _withheld(inspection: str | None) -> str:
    """The private miss's second line: where the withheld hash is, or how to get it."""
    if inspection is None:
        return (
            "private data: the request hash is withheld; --inspection PATH records it "
            "in an owner-only file"
        )
    return (
        f"private data: the request hash is withheld; it is in the owner-only record {inspection}"
    )


def _print_response(stored: bytes, *, compact: bool) -> None:
    response = msgspec.json.decode(stored)
    if compact:
        write(canonical_json(response) + b"\n")
    else:
        print_json(response)


LOOKUP: Final = Command(
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
        fixture_arg(),
        request_or_stdin_arg(),
        arg(
            "--private",
            action="store_true",
            help="private data: print no request hash (record it with --inspection instead)",
        ),
        arg(
            "--inspection",
            metavar="PATH",
            help=(
                "append a miss as a JSON line {event, request_hash, call} to this owner-only "
                "file (created 0600, never through a symbolic link)"
            ),
        ),
        arg(
            "--compact",
            action="store_true",
            help="print the response as one line of canonical JSON instead of indented",
        ),
        from_arg(),
        ceiling_arg(),
    ),
    handler=_cmd_lookup,
)
