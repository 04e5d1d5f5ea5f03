"""``replay-actor compare BASE.log CAND.log``: where did the candidate diverge
(docs/attribution.md). The reading, grouping, pairing and reports are ``attribution/``'s;
``--eval`` reads Inspect's own logs through ``integrations/inspect_eval.py``.

Runs in: the ``replay-actor`` process, reading two run logs, their request sidecars and
(``--eval``) two Inspect logs; nothing else is opened, and nothing is fetched.

Exit codes: 0 every sample identical, 1 any sample not identical (diverged, missed,
fewer or extra calls), 2 the logs cannot be compared: a usage error, a log that cannot
be read, a page that cannot be written, or a failure of ``compare`` itself (the
diverged status owns 1, so nothing else may end with it).
"""

from __future__ import annotations

import argparse
import os
from typing import Final

from .._errors import ReplayError
from ._shared import EXIT_OK, EXIT_USAGE, CLIError, Command, arg, write

__all__ = ["COMPARE", "EXIT_DIFFERENT"]

#: Some sample is not identical.
EXIT_DIFFERENT: Final = 1


def _write_html(path: str, page: str) -> None:
    """The page, written whole or not at all (never an empty or a half page)."""
    from ..attribution.read import display_path
    from ..files.durable import atomic_write

    try:
        atomic_write(os.path.abspath(path), page.encode("utf-8"))
    except OSError as exc:
        raise CLIError(
            f"{display_path(path)}: cannot be written ({exc.strerror or type(exc).__name__})",
            EXIT_USAGE,
        ) from None


def _compare(args: argparse.Namespace) -> int:
    import msgspec

    from ..attribution.align import align
    from ..attribution.read import read_log
    from ..attribution.report import Comparison, html_page, json_document, text_report
    from ..attribution.requests import Requests

    try:
        base = read_log(args.baseline)
        cand = read_log(args.candidate)
        evals = None
        if args.eval is not None:
            from ..integrations.inspect_eval import read_eval_rows

            evals = read_eval_rows(args.eval[0]), read_eval_rows(args.eval[1])
    except ReplayError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None
    sidecars = Requests([base.source, cand.source]).present
    comparison = Comparison(
        base,
        cand,
        align(base, cand, evals=evals),
        sidecars=(sidecars[0], sidecars[1]),
        evals=evals is not None,
    )
    if args.html is not None:
        _write_html(os.fspath(args.html), html_page(comparison))
    if args.json:
        # msgspec's encoder: the document of tens of thousands of samples in milliseconds
        # (the standard one is pure Python once indented); the same layout as print_json.
        document = msgspec.json.encode(json_document(comparison))
        write(msgspec.json.format(document, indent=2) + b"\n")
    else:
        write(text_report(comparison).encode("utf-8", "surrogateescape"))
    return EXIT_OK if comparison.identical else EXIT_DIFFERENT


def _cmd_compare(args: argparse.Namespace) -> int:
    try:
        return _compare(args)
    except (CLIError, KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception as exc:
        # Exit 1 says "diverged": a failure of compare itself must not say it.
        raise CLIError(
            f"cannot compare: internal error ({type(exc).__name__}); please report it",
            EXIT_USAGE,
        ) from None


COMPARE: Final = Command(
    description=(
        "Compare two run logs (run --log, serve --log, or a manifest's log key): group\n"
        "the calls into samples (by eval row, else by conversation), pair each baseline\n"
        "sample with the candidate's same question (by content, never by order), align\n"
        "their calls (a retry is another attempt of its call), and say per sample:\n"
        "identical, diverged at call k (with the request paths that differ), missed,\n"
        "fewer or extra calls. With --eval, Inspect's own logs of both runs make the\n"
        "samples, and each sample's score change is shown beside its divergence."
    ),
    epilog=(
        "example:\n"
        "  replay-actor run --log base.log eval.toml -- python agent.py\n"
        "  replay-actor run --log cand.log eval.toml -- python agent.py --candidate\n"
        "  replay-actor compare base.log cand.log --html report.html\n"
        "  replay-actor compare base.log cand.log --eval logs/base.eval logs/cand.eval\n\n"
        "exit: 0 every sample identical, 1 any sample differs, 2 the logs cannot be\n"
        "compared (a usage error, a log that cannot be read; lines that are not log\n"
        "lines are skipped and counted)"
    ),
    arguments=(
        arg("baseline", metavar="BASE.log", help="the baseline's run log"),
        arg("candidate", metavar="CAND.log", help="the candidate's run log"),
        arg("--json", action="store_true", help="print the comparison as JSON instead"),
        arg("--html", metavar="OUT", default=None, help="also write a self-contained HTML page"),
        arg(
            "--eval",
            nargs=2,
            metavar=("BASE.eval", "CAND.eval"),
            default=None,
            help="Inspect's own logs of the two runs: their samples are the samples, with "
            "their score changes (needs replay-actor[inspect])",
        ),
    ),
    handler=_cmd_compare,
)
