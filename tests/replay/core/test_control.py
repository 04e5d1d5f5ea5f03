"""The control messages (``replay/core/control.py``), tested as the frames are: every
message round-trips, every truncation and every structural corruption is rejected with
``ControlMessageError``, and no byte string makes the parsers raise anything else."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay_actor._errors import ControlMessageError, ReplayError
from replay_actor.replay.core import control
from replay_actor.replay.core.control import Reply, Request
from replay_actor.replay.core.protocol import ActorConfig

CONFIG = ActorConfig(
    fixture="/tmp/fixture.jsonl",
    owner_pid=4321,
    owner_create_time=1700000000.25,
    private=True,
    ceilings={"max_entries": 10, "max_line_bytes": 4096},
    inspection_path=None,
)

configs = st.builds(
    ActorConfig,
    fixture=st.text(max_size=40),
    owner_pid=st.integers(min_value=1, max_value=2**22),
    owner_create_time=st.floats(allow_nan=False, allow_infinity=False),
    private=st.booleans(),
    ceilings=st.dictionaries(st.text(max_size=12), st.integers(0, 2**40), max_size=4),
    inspection_path=st.none() | st.text(max_size=40),
    owner_watch=st.sampled_from(["pidfd", "psutil"]),
    inspection_served=st.booleans(),
)
tokens = st.integers(min_value=0, max_value=2**64 - 1).map(control.token)
pids = st.none() | st.integers(min_value=1, max_value=2**63 - 1)


def test_the_wire_layout_is_unchanged() -> None:
    # The bytes the zygote, its holders and older clients exchange: pinned.
    assert control.encode_request(b"7", CONFIG) == b"7 " + msgspec.json.encode(CONFIG)
    assert control.encode_reply(b"7", 1234) == b"7 1234"
    assert control.encode_reply(b"7", None) == b"7 -"
    assert (control.IDLE, control.EXIT) == (b"idle", b"exit")
    assert control.token(0) == b"0"
    assert control.token(2**64 - 1) == b"18446744073709551615"


@settings(max_examples=200, deadline=None)
@given(tokens, configs)
def test_a_request_round_trips(token: bytes, config: ActorConfig) -> None:
    message = control.encode_request(token, config)
    assert control.parse_request(message) == Request(token, config)
    assert control.token_of(message) == token


@settings(max_examples=200, deadline=None)
@given(tokens, pids)
def test_a_reply_round_trips(token: bytes, pid: int | None) -> None:
    message = control.encode_reply(token, pid)
    assert len(message) <= control.MAX_REPLY
    assert control.parse_reply(message) == Reply(token, pid)
    assert control.token_of(message) == token


def test_every_truncation_of_a_request_is_rejected() -> None:
    message = control.encode_request(b"12", CONFIG)
    for cut in range(len(message)):
        with pytest.raises(ControlMessageError):
            control.parse_request(message[:cut])


def test_a_reply_cut_by_the_readers_buffer_is_rejected() -> None:
    # A datagram longer than the buffer arrives cut to the buffer: MAX_REPLY + 1 bytes,
    # which no reply is, so a cut reply is never read as another pid.
    longest = control.encode_reply(control.token(2**64 - 1), 2**63 - 1)
    assert control.parse_reply(longest).pid == 2**63 - 1  # every real reply fits
    for pid_digits in (21, 30):
        oversized = b"1" * control.MAX_TOKEN + b" " + b"9" * pid_digits
        assert len(oversized) > control.MAX_REPLY
        with pytest.raises(ControlMessageError):
            control.parse_reply(oversized[: control.MAX_REPLY + 1])


def test_every_truncation_of_a_reply_before_its_pid_is_rejected() -> None:
    message = control.encode_reply(b"12", 345)
    for cut in range(len(b"12 ") + 1):
        with pytest.raises(ControlMessageError):
            control.parse_reply(message[:cut])


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b" ",
        b"12",  # no separator
        b" 345",  # no token
        b"x2 345",  # a token not of digits
        b"\xd9\xa1 345",  # non-ASCII digits
        b"123456789012345678901 5",  # a 21-digit token
        b"12 ",  # no pid
        b"12  345",  # two spaces
        b"12 34x",
        b"12 -5",
        b"12 0",  # no process has pid 0
        b"12 --",
        b"12 345 ",
        control.IDLE,
        control.EXIT,
    ],
)
def test_a_corrupt_reply_is_rejected(message: bytes) -> None:
    with pytest.raises(ControlMessageError):
        control.parse_reply(message)


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"12",
        b"12 ",
        b"x 12",
        b"12 null",
        b"12 []",
        b"12 {}",  # the config's fields are required
        b'12 {"fixture": 5}',
        b"12 " + msgspec.json.encode(CONFIG)[:-1] + b',"unknown":1}',  # unknown field
        b"12 " + msgspec.json.encode(CONFIG) + b"x",  # trailing bytes
        b"12\t" + msgspec.json.encode(CONFIG),
        control.IDLE,
        control.EXIT,
    ],
)
def test_a_corrupt_request_is_rejected(message: bytes) -> None:
    with pytest.raises(ControlMessageError):
        control.parse_request(message)


def test_the_rejection_of_a_request_does_not_quote_its_body() -> None:
    secret = "sk-planted-control-secret-0123456789"
    body = msgspec.json.encode({"fixture": secret, "owner_pid": "x"})
    with pytest.raises(ControlMessageError) as caught:
        control.parse_request(b"3 " + body)
    assert secret not in str(caught.value)
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


def test_the_error_is_a_replay_error_and_a_value_error() -> None:
    assert issubclass(ControlMessageError, ReplayError)
    assert issubclass(ControlMessageError, ValueError)


@pytest.mark.parametrize("bad", [-1, 10**20])
def test_a_token_out_of_range_is_refused(bad: int) -> None:
    with pytest.raises(ControlMessageError):
        control.token(bad)


@pytest.mark.parametrize("pid", [0, -3])
def test_a_reply_with_no_real_pid_is_refused(pid: int) -> None:
    with pytest.raises(ControlMessageError):
        control.encode_reply(b"1", pid)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=120))
def test_no_bytes_make_the_parsers_raise_anything_else(data: bytes) -> None:
    # Anything but ControlMessageError escapes and fails the test; what parses is what
    # encoding it gives back.
    try:
        reply = control.parse_reply(data)
    except ControlMessageError:
        pass
    else:
        assert control.parse_reply(control.encode_reply(reply.token, reply.pid)) == reply
    try:
        request = control.parse_request(data)
    except ControlMessageError:
        pass
    else:
        assert control.token_of(data) == request.token


@settings(max_examples=300, deadline=None)
@given(tokens, pids, st.integers(0, 40), st.integers(0, 255))
def test_a_byte_changed_in_a_reply_is_rejected_or_read_as_itself(
    token: bytes, pid: int | None, index: int, value: int
) -> None:
    # A reply has no checksum: a changed digit is another valid reply. What may never
    # happen is a reply read as something its bytes do not say.
    message = bytearray(control.encode_reply(token, pid))
    message[index % len(message)] = value
    try:
        got = control.parse_reply(bytes(message))
    except ControlMessageError:
        return
    head, _, tail = bytes(message).partition(b" ")
    assert got.token == head
    if got.pid is None:
        assert tail == b"-"
    else:
        assert int(tail) == got.pid
