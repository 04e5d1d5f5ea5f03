"""The control messages: how the caller asks the zygote (and the zygote a holder) for an
actor, and how the answer comes back. Encoded and parsed here only, with no I/O.

Runs in: the caller (``caller/zygote_client.py`` sends requests and reads replies), the
zygote and the holders (``forked/forkloop.py`` reads requests and sends replies; the
zygote relays a holder's replies and offers).

Every message is one ``SOCK_SEQPACKET`` datagram (docs/architecture.md, "The zygote")::

    request   TOKEN SP config-JSON      (+ the actor's socket end, SCM_RIGHTS)
    reply     TOKEN SP PID              an actor was forked: its pid
              TOKEN SP -                no actor was forked (the acquirer hung up, ...)
    holder -> zygote    idle            nothing to do for a while: may I go?
    zygote -> holder    exit            nothing more comes: go once your actors have

``TOKEN`` is the request's number in ASCII digits, so that an acquirer tells a late
reply to an earlier, timed-out request from its own. A malformed message raises
``ControlMessageError``: never a traceback in the zygote, whose loop drops it.
"""

from __future__ import annotations

from typing import Final, NamedTuple

import msgspec

from ..._errors import ControlMessageError
from .protocol import ActorConfig

__all__ = [
    "EXIT",
    "IDLE",
    "MAX_MESSAGE",
    "MAX_REPLY",
    "MAX_TOKEN",
    "NO_ACTOR",
    "Reply",
    "Request",
    "encode_reply",
    "encode_request",
    "parse_reply",
    "parse_request",
    "token",
    "token_of",
]

#: holder -> zygote: no actor left and nothing asked for ``idle`` seconds; may I go?
IDLE: Final = b"idle"
#: zygote -> holder: nothing more will be routed to you; go once your actors have.
EXIT: Final = b"exit"
#: The largest control message read (a config names a path: far below this).
MAX_MESSAGE: Final = 1 << 20
#: The most digits a token has (a 64-bit counter's).
MAX_TOKEN: Final = 20
#: A reply's pid field when no actor was forked.
NO_ACTOR: Final = b"-"
#: The longest reply (a token, a space, a pid of as many digits). A reader receives with
#: a buffer one byte larger, so a reply cut short by too small a buffer (a datagram is
#: truncated to the buffer) is longer than this and rejected, never read as another pid.
MAX_REPLY: Final = 2 * MAX_TOKEN + 1

_encode: Final = msgspec.json.Encoder().encode
_decode_config: Final = msgspec.json.Decoder(ActorConfig).decode


class Request(NamedTuple):
    """An acquirer's request for an actor, as the zygote or a holder reads it."""

    token: bytes
    config: ActorConfig


class Reply(NamedTuple):
    """The answer to one request: the forked actor's pid, or None (no actor)."""

    token: bytes
    pid: int | None


def token(number: int) -> bytes:
    """The token of the acquirer's ``number``-th request."""
    if number < 0:
        raise ControlMessageError("a request's number is never negative")
    text = str(number).encode("ascii")
    if len(text) > MAX_TOKEN:
        raise ControlMessageError("a request's number has too many digits")
    return text


def _checked_token(field: bytes) -> bytes:
    if not field or len(field) > MAX_TOKEN or not (field.isdigit() and field.isascii()):
        raise ControlMessageError("the token is not 1 to 20 ASCII digits")
    return field


def _split(message: bytes) -> tuple[bytes, bytes]:
    head, sep, body = message.partition(b" ")
    if not sep:
        raise ControlMessageError("no space after the token")
    return _checked_token(head), body


def token_of(message: bytes) -> bytes:
    """The token of a request or a reply, without parsing the rest (the zygote files a
    request it forwards to a holder under it)."""
    return _split(message)[0]


def encode_request(request_token: bytes, config: ActorConfig) -> bytes:
    """``TOKEN SP config``: what the acquirer sends with the actor's socket end."""
    return _checked_token(request_token) + b" " + _encode(config)


def parse_request(message: bytes) -> Request:
    """The request in ``message``; ``ControlMessageError`` if it is not one."""
    request_token, body = _split(message)
    try:
        config = _decode_config(body)
    except msgspec.DecodeError:
        # from None: the decoder's message may quote the body (a path), kept in here.
        raise ControlMessageError("the request's config is not a valid config") from None
    return Request(request_token, config)


def encode_reply(reply_token: bytes, pid: int | None) -> bytes:
    """``TOKEN SP PID``, or ``TOKEN SP -`` when no actor was forked."""
    if pid is None:
        return _checked_token(reply_token) + b" " + NO_ACTOR
    if pid <= 0:
        raise ControlMessageError("an actor's pid is a positive number")
    return _checked_token(reply_token) + b" " + str(pid).encode("ascii")


def parse_reply(message: bytes) -> Reply:
    """The reply in ``message``; ``ControlMessageError`` if it is not one."""
    if len(message) > MAX_REPLY:
        raise ControlMessageError("the reply is longer than any reply")
    reply_token, field = _split(message)
    if field == NO_ACTOR:
        return Reply(reply_token, None)
    if not field or len(field) > MAX_TOKEN or not (field.isdigit() and field.isascii()):
        raise ControlMessageError("the reply's pid is neither digits nor '-'")
    pid = int(field)
    if pid <= 0:
        raise ControlMessageError("the reply's pid is not a positive number")
    return Reply(reply_token, pid)
