"""Untrusted JSON: every bad input is a ValueError, never a RecursionError."""

from __future__ import annotations

import pytest

from thrum import safejson


@pytest.mark.parametrize("text", ["[" * 50_000 + "]" * 50_000, '{"a":' * 5_000 + "1" + "}" * 5_000])
def test_deep_nesting_is_a_value_error(text):
    with pytest.raises(ValueError, match="nested deeper"):
        safejson.loads(text)
    with pytest.raises(ValueError):
        safejson.loads(text.encode())


def test_brackets_inside_strings_do_not_count():
    text = '{"s": "' + "[" * 10_000 + '\\"]"}'
    assert safejson.loads(text)["s"].startswith("[[[")
    assert not safejson.too_deep(text)


def test_the_limit_itself_is_accepted():
    ok = "[" * safejson.MAX_DEPTH + "]" * safejson.MAX_DEPTH
    assert safejson.loads(ok) is not None
    with pytest.raises(ValueError):
        safejson.loads("[" + ok + "]")


@pytest.mark.parametrize("bad", [b"{", b"\xff\xfe", b"NaN", b"[1,]"])
def test_malformed_input_is_a_value_error(bad):
    with pytest.raises(ValueError):
        safejson.loads(bad)
