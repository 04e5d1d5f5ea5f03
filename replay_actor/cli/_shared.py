"""What every command module of the CLI shares: the table's records (``Command``, ``Arg``,
``OneOf``, ``LazyCommand``), the arguments several commands take, reading inputs,
writing outputs, the exit codes and ``CLIError``.

Runs in: the ``replay-actor`` process. Imported by ``replay-actor --help``, so it imports
nothing of the package at module level but the exception tree: what a shared argument
needs (the ceilings, the vendor registry, the request hash) is imported by the function
that needs it, which only a command that takes that argument calls.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from .._errors import FixtureError, RequestError

if TYPE_CHECKING:
    from ..fixture import Ceilings, FixtureSet

__all__ = [
    "EXIT_INVALID",
    "EXIT_MISS",
    "EXIT_OK",
    "EXIT_USAGE",
    "PROG",
    "STDIN",
    "Arg",
    "CLIError",
    "Command",
    "LazyCommand",
    "OneOf",
    "arg",
    "body_args",
    "ceiling_arg",
    "ceilings",
    "error",
    "fixture_arg",
    "from_arg",
    "hash_arg",
    "hash_of",
    "label",
    "load",
    "note",
    "plural",
    "print_json",
    "read_json",
    "read_request_arg",
    "request_or_stdin_arg",
    "response_arg",
    "write",
]

EXIT_OK: Final = 0
EXIT_INVALID: Final = 1
EXIT_USAGE: Final = 2
EXIT_MISS: Final = 3

PROG: Final = "replay-actor"
STDIN: Final = "-"
_STDIN_LABEL: Final = "<stdin>"
_HASH_PREFIX: Final = "sha256:"
_HEX: Final = frozenset("0123456789abcdef")


class CLIError(Exception):
    """An expected failure: printed as one line, mapped to an exit code."""

    def __init__(self, message: str, code: int = EXIT_INVALID) -> None:
        super().__init__(message)
        self.code = code


# -- the table's records -----------------------------------------------------------------


@dataclass(frozen=True)
class Arg:
    """One ``add_argument`` call: its names and keyword options."""

    names: tuple[str, ...]
    options: Mapping[str, Any]


def arg(*names: str, **options: Any) -> Arg:
    return Arg(names, options)


@dataclass(frozen=True)
class OneOf:
    """A mutually exclusive group of arguments."""

    args: tuple[Arg, ...]
    required: bool = True


@dataclass(frozen=True)
class Command:
    """A subcommand's page: what ``replay-actor NAME --help`` says, its arguments, its
    handler. Its name and one-line help are its ``LazyCommand`` line in ``COMMANDS``."""

    description: str
    epilog: str
    arguments: tuple[Arg | OneOf, ...]
    handler: Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class LazyCommand:
    """One line of the command table: the name, the help ``replay-actor --help`` lists,
    and where the ``Command`` record is, as ``"module:ATTRIBUTE"``, imported only when
    the command is chosen."""

    name: str
    help: str
    target: str

    def load(self) -> Command:
        module, _, attribute = self.target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, Command):
            raise TypeError(f"{self.target} is not a Command record")
        return command


# -- arguments shared by several commands ------------------------------------------------


def hash_arg(value: str) -> str:
    """``type=`` of a REQUEST_HASH argument: the form a request hash has, or a usage error."""
    digits = value[len(_HASH_PREFIX) :]
    if not value.startswith(_HASH_PREFIX) or len(digits) != 64 or not set(digits) <= _HEX:
        raise argparse.ArgumentTypeError(
            "a request hash is 'sha256:' followed by 64 lowercase hexadecimal digits"
        )
    return value


def _ceiling_names() -> tuple[str, ...]:
    from ..fixture import Ceilings

    return tuple(Ceilings.__struct_fields__)


def _parse_ceiling(value: str) -> tuple[str, int]:
    names = _ceiling_names()
    name, sep, number = value.partition("=")
    name = name.strip().replace("-", "_")
    if not sep or name not in names:
        raise argparse.ArgumentTypeError(
            f"expected NAME=INTEGER with NAME one of {', '.join(names)}"
        )
    try:
        parsed = int(number.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{name} needs an integer value") from None
    return name, parsed


def ceiling_arg() -> Arg:
    """``--ceiling NAME=N`` (repeatable): the pairs ``ceilings`` turns into ``Ceilings``."""
    return arg(
        "--ceiling",
        metavar="NAME=N",
        type=_parse_ceiling,
        action="append",
        help=(
            "override one load ceiling, e.g. max_entries=10000 (repeatable); "
            f"names: {', '.join(_ceiling_names())}"
        ),
    )


def ceilings(pairs: list[tuple[str, int]] | None) -> Ceilings | None:
    """The ``Ceilings`` of ``--ceiling``'s pairs (None without any); a usage error if out
    of range."""
    if not pairs:
        return None
    from ..fixture import Ceilings

    try:
        return Ceilings(**dict(pairs))
    except (ValueError, TypeError) as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None


def load(path: str, limits: Ceilings | None) -> FixtureSet:
    """The fixture at ``path``; a rejection is a ``CLIError`` naming reason and line."""
    from ..fixture import load_fixture

    try:
        return load_fixture(path, ceilings=limits)
    except FixtureError as exc:
        where = "" if exc.line is None else f" at line {exc.line}"
        message = f"{path}: rejected: {exc.reason}{where}"
    raise CLIError(message)


def from_arg() -> Arg:
    """``--from VENDOR``: the request file is that vendor's request body."""
    from ..vendors import vendor_names

    return arg(
        "--from",
        dest="vendor",
        choices=vendor_names(),
        default=None,
        help=(
            "the request file is this vendor's request body (chat completions or "
            "messages), read as the SDK transports read it"
        ),
    )


def fixture_arg() -> Arg:
    return arg("fixture", metavar="FIXTURE", help="fixture file")


def request_or_stdin_arg() -> Arg:
    return arg(
        "request",
        nargs="?",
        default=STDIN,
        metavar="REQUEST.json",
        help="the request file, or - for stdin (the default)",
    )


def body_args(verb: str) -> OneOf:
    """``--content TEXT`` or ``--response FILE`` (stub, add)."""
    return OneOf(
        (
            arg("--content", metavar="TEXT", help=f'{verb} {{"content": TEXT}}'),
            arg("--response", metavar="FILE", help=f"{verb} this JSON object (- for stdin)"),
        )
    )


def response_arg(args: argparse.Namespace) -> dict[str, Any]:
    """The response of ``--content`` or ``--response`` (stub, add)."""
    if args.response is None:
        return {"content": args.content}
    response = read_json(args.response, "response")
    if type(response) is not dict:
        raise CLIError(f"{label(args.response)}: the response must be a JSON object")
    return response


# -- input -------------------------------------------------------------------------------


def label(source: str) -> str:
    """How messages name an input: its path, or ``<stdin>`` for ``-``."""
    return _STDIN_LABEL if source == STDIN else source


def read_json(source: str, what: str) -> Any:
    """Read one JSON document from a path or ``-`` (stdin), strictly.

    Strict means what the fixture format means: UTF-8 without a byte order mark, no
    ``NaN``/``Infinity``, no key repeated in one object (which value would count?). Errors
    name the input and a position, never its bytes: a request may hold a private prompt.
    """
    from .._strict_json import NotStrictJSON, loads_strict

    name = label(source)
    try:
        if source == STDIN:
            data = sys.stdin.buffer.read()
        else:
            with open(source, "rb") as handle:
                data = handle.read()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise CLIError(f"{name}: cannot read {what}: {reason}") from None
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
    raise CLIError(f"{name}: {what} is {problem}")


def read_request_arg(source: str, vendor: str | None = None) -> Any:
    """The provider-neutral request in ``source`` (a path or ``-``).

    With ``vendor`` (``--from openai|anthropic``) the file holds that vendor's request
    body, as an SDK sends it or a log shows it, and is read through the one vendor
    mapping (docs/sdk.md, "The mapping"), so it hashes as the SDK call does. Errors name
    the input and the field, never its contents.
    """
    data = read_json(source, "request")
    if vendor is None:
        _refuse_vendor_body(data, source)
        return data
    from ..vendors import make_vendor

    try:
        return make_vendor(vendor).read_body(data).request
    except RequestError as exc:
        raise CLIError(f"{label(source)}: {exc}") from None


#: Keys a vendor's request body has and a provider-neutral request never does: a body
#: copied from a log is the usual mistake, and its fix is ``--from``.
_VENDOR_KEYS: Final = {
    "model": "openai",
    "contents": "gemini",
    "input": "openai-responses",
    "max_tokens": "anthropic",
}


def _refuse_vendor_body(data: Any, source: str) -> None:
    """A ``CLIError`` naming ``--from`` for a vendor SDK's body read as a neutral request."""
    if type(data) is not dict or "kind" in data:
        return  # a neutral request of another kind (an embedding has a model)
    found = [key for key in _VENDOR_KEYS if key in data]
    if not found:
        return
    guess = "anthropic" if "max_tokens" in data and "messages" in data else _VENDOR_KEYS[found[0]]
    raise CLIError(
        f"{label(source)}: this looks like a vendor SDK's request body (it has "
        f"{found[0]!r}), not a provider-neutral request: add --from {guess} "
        "(--from takes openai, anthropic, openai-responses or gemini)"
    )


def hash_of(request: Any, name: str) -> str:
    """``request_hash(request)``; an invalid request is a ``CLIError`` naming ``name``."""
    from .._request import request_hash

    try:
        return request_hash(request)
    except RequestError as exc:
        raise CLIError(f"{name}: {exc}") from None


# -- output ------------------------------------------------------------------------------


def write(data: bytes, *, stream: Any = None) -> None:
    """Write bytes to stdout exactly (UTF-8 whatever the locale; no newline translation)."""
    out = sys.stdout if stream is None else stream
    out.flush()
    buffer = getattr(out, "buffer", None)
    if buffer is None:  # a replaced text-only stream (some embedding tools do this)
        out.write(data.decode("utf-8"))
    else:
        buffer.write(data)
        buffer.flush()


def print_json(value: Any) -> None:
    text = json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)
    # surrogateescape: a path from argv that was not UTF-8 goes back out as its bytes.
    write(text.encode("utf-8", "surrogateescape") + b"\n")


def error(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)


def note(message: str) -> None:
    print(f"{PROG}: note: {message}", file=sys.stderr, flush=True)


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
