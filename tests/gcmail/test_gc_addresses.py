"""The Gas City address ⇄ thrum agent name mapping (pure): valid, deterministic,
injective, and the address given back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from thrum.events.names import NAME_RE, RESERVED_NAMES
from thrum.gcmail.addresses import AddressError, from_name, is_mailbox, needs_display, to_name


@pytest.mark.parametrize("address,name", [
    ("human", "gc_human"),
    ("mayor", "gc_mayor"),
    ("gc-42", "gc_gc_42"),
    ("myrig/witness", "gc_myrig__witness"),
    ("rig.name/agent", "gc_rig___name__agent"),
    ("my_rig/polecats/nux", "gc_my____rig__polecats__nux"),
    ("@alice", "alice"),
])
def test_plain_addresses_have_readable_names_that_decode_themselves(address, name):
    assert to_name(address) == name
    assert from_name(name) == address
    assert not needs_display(name)


@pytest.mark.parametrize("address", ["Mayor", "may or", "x--y", "/lead", "trail-", "ünï", "a" * 80,
                                     "@Alice", "@gc_mayor", "@", "@all", "e\u0301"])
def test_other_addresses_get_a_hashed_name_and_decode_through_the_display(address):
    name = to_name(address)
    assert name.startswith("gcx_") and NAME_RE.fullmatch(name)
    assert needs_display(name)
    assert from_name(name, address) == address
    assert from_name(name, "someone else") == name  # a display that does not belong to it is not trusted


def test_reserved_names_stay_reserved():
    from thrum.gcmail import addresses
    assert addresses._RESERVED == RESERVED_NAMES


def test_thrum_agents_show_as_at_names():
    assert from_name("alice") == "@alice"
    assert to_name("@alice") == "alice"
    assert not is_mailbox("alice") and is_mailbox("gc_alice") and is_mailbox("gcx_x_aaaa")


@pytest.mark.parametrize("address", ["", "   ", "x" * 257])
def test_empty_or_overlong_addresses_are_refused(address):
    with pytest.raises(AddressError):
        to_name(address)


addresses = st.one_of(
    st.text(min_size=1, max_size=80).filter(lambda a: a.strip()),
    st.from_regex(r"[a-z0-9]{1,6}([-/._][a-z0-9]{1,6}){0,5}", fullmatch=True),
    st.from_regex(r"@[a-z0-9_]{1,20}", fullmatch=True),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(addresses, min_size=2, max_size=6, unique=True))
def test_distinct_addresses_get_distinct_valid_names_that_round_trip(batch):
    names = [to_name(a) for a in batch]
    assert len(set(names)) == len(names)
    for address, name in zip(batch, names):
        assert NAME_RE.fullmatch(name) and name not in RESERVED_NAMES
        assert to_name(address) == name  # deterministic
        assert from_name(name, address if needs_display(name) else None) == address
