"""``replay-actor compare BASE.log CAND.log``: where did the candidate diverge
(docs/attribution.md). The reading, grouping and reports are ``attribution/``'s.

Runs in: the ``replay-actor`` process, reading two run logs and their request sidecars;
nothing else is opened, and nothing is fetched.

Exit codes: 0 every sample identical, 1 any sample not identical (diverged, missed,
fewer or extra calls), 2 a usage error or a log that cannot be read (the diverged status
owns 1, so bad input takes argparse's 2).
"""

from __future__ import annotations

import argparse
import os
from typing import Final

from .._errors import ReplayError
from ._shared import EXIT_OK, EXIT_USAGE, CLIError, Command, arg, print_json, write

__all__ = ["COMPARE", "EXIT_DIFFERENT"]

#: Some sample is not identical.
EXIT_DIFFERENT: Final = 1


def _write_html(path: str, page: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(page)
    except OSError as exc:
        raise CLIError(
            f"{path}: cannot be written ({exc.strerror or type(exc).__name__})", EXIT_USAGE
        ) from None


def _cmd_compare(args: argparse.Namespace) -> int:
    from ..attribution.align import align
    from ..attribution.read import read_log
    from ..attribution.report import Comparison, html_page, json_document, text_report

    try:
        base = read_log(args.baseline)
        cand = read_log(args.candidate)
    except ReplayError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None
    comparison = Comparison(base, cand, align(base, cand))
    if args.html is not None:
        _write_html(os.fspath(args.html), html_page(comparison))
    if args.json:
        print_json(json_document(comparison))
    else:
        write(text_report(comparison).encode("utf-8", "surrogateescape"))
    return EXIT_OK if comparison.identical else EXIT_DIFFERENT


COMPARE: Final = Command(
    description=(
        "Compare two run logs (run --log, serve --log, or a manifest's log key): group\n"
        "the calls into samples (by scope, else by conversation), align each sample's\n"
        "calls, and say per sample: identical, diverged at call k (with the request\n"
        "paths that differ), missed, fewer or extra calls."
    ),
    epilog=(
        "example:\n"
        "  replay-actor run --log base.log eval.toml -- python agent.py\n"
        "  replay-actor run --log cand.log eval.toml -- python agent.py --candidate\n"
        "  replay-actor compare base.log cand.log --html report.html\n\n"
        "exit: 0 every sample identical, 1 any sample differs, 2 usage error or a log\n"
        "that cannot be read (lines that are not log lines are skipped and counted)"
    ),
    arguments=(
        arg("baseline", metavar="BASE.log", help="the baseline's run log"),
        arg("candidate", metavar="CAND.log", help="the candidate's run log"),
        arg("--json", action="store_true", help="print the comparison as JSON instead"),
        arg("--html", metavar="OUT", default=None, help="also write a self-contained HTML page"),
    ),
    handler=_cmd_compare,
)
