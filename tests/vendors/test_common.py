"""The shared mapping rules: canonical tool-call arguments and one-text-part content."""

from __future__ import annotations

import pytest

from replay_actor.vendors._common import canonical_arguments, collapse_content


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"b": 1.0, "a": [1, 2]}', '{"a":[1,2],"b":1}'),
        ('{"city":"Paris"}', '{"city":"Paris"}'),
        (" 5 ", "5"),
        ("", ""),
        ("not json", "not json"),
        ('{"a": 1', '{"a": 1'),
        ('{"big": 18446744073709551616}', '{"big": 18446744073709551616}'),
        ('{"x": 1e400}', '{"x": 1e400}'),
        ('{"é": "\\u00e9"}', '{"é":"é"}'),
    ],
)
def test_canonical_arguments(text: str, expected: str) -> None:
    assert canonical_arguments(text) == expected


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("hi", "hi"),
        (None, None),
        ([{"type": "text", "text": "hi"}], "hi"),
        ([{"text": "hi", "type": "text"}], "hi"),
        (
            [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
            [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
        ),
        (
            [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        ),
        (
            [{"type": "image_url", "image_url": {"url": "x"}}],
            [{"type": "image_url", "image_url": {"url": "x"}}],
        ),
        ([{"type": "text", "text": 5}], [{"type": "text", "text": 5}]),
        ([], []),
    ],
)
def test_collapse_content(content: object, expected: object) -> None:
    assert collapse_content(content) == expected
