"""The orders ``nearest`` and pairing break ties with (docs/authoring.md): a split
request's canonical bytes rebuilt from its slices are the request's own RFC 8785 bytes,
the fast comparison of two requests' canonical bytes agrees with comparing them whole,
and the whole-request distance is zero exactly for equal requests and symmetric."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from replay_actor._request import canonical_request
from replay_actor.authoring.nearest import (
    canonical_bytes,
    canonical_less,
    request_distance,
    split_request,
)

_text = st.text(alphabet='ab1 "\\é', max_size=6)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant"]), "content": _text}
)
_params = st.dictionaries(
    st.sampled_from(["temperature", "seed", "stop", "top_p"]),
    st.one_of(st.integers(-20, 120), st.floats(0, 2, allow_nan=False), st.lists(_text, max_size=2)),
    max_size=3,
)
_requests = st.builds(
    lambda messages, params, tools, scope: {
        "messages": messages,
        **({"params": params} if params else {}),
        **({"tools": [{"name": n} for n in tools]} if tools else {}),
        **({"scope": {"epoch": scope}} if scope else {}),
    },
    st.lists(_message, min_size=1, max_size=3),
    _params,
    st.lists(st.sampled_from(["x", "y", "xy"]), max_size=2),
    st.integers(0, 12),
)


@settings(max_examples=300, deadline=None)
@given(a=_requests, b=_requests)
def test_the_orders_agree_with_the_canonical_bytes(a: dict[str, Any], b: dict[str, Any]) -> None:
    _, x = split_request(a)
    _, y = split_request(b)
    assert canonical_bytes(x) == canonical_request(a)
    assert canonical_less(x, y) == (canonical_request(a) < canonical_request(b))
    assert request_distance(x, y) == request_distance(y, x)
    assert (request_distance(x, y) == 0) == (canonical_request(a) == canonical_request(b))
