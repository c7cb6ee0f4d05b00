"""Gas City addresses ⇄ thrum names (pure): mailboxes and the agents acting for them
are valid names, deterministic, injective, and give the address back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from thrum.events.names import NAME_RE, RESERVED_NAMES
from thrum.gcmail import addresses
from thrum.gcmail.addresses import AddressError, address_of, agent, mailbox, mailbox_of, needs_display

TAG = "abcdefgh"
OTHER_TAG = "stuvwxyz"


@pytest.mark.parametrize(
    "address,box,acting",
    [
        ("human", "gc_human", "gcr_abcdefgh_human"),
        ("mayor", "gc_mayor", "gcr_abcdefgh_mayor"),
        ("gc-42", "gc_gc_42", "gcr_abcdefgh_gc_42"),
        ("myrig/witness", "gc_myrig__witness", "gcr_abcdefgh_myrig__witness"),
        ("rig.name/agent", "gc_rig___name__agent", "gcr_abcdefgh_rig___name__agent"),
        ("my_rig/polecats/nux", "gc_my____rig__polecats__nux", "gcr_abcdefgh_my____rig__polecats__nux"),
        ("@alice", "alice", "alice"),
    ],
)
def test_plain_addresses_have_readable_names_that_decode_themselves(address, box, acting):
    assert mailbox(address) == box
    assert agent(box, TAG) == acting
    for name in (box, acting):
        assert mailbox_of(name) == box
        assert address_of(name) == address
        assert not needs_display(name)


@pytest.mark.parametrize(
    "address",
    [
        "Mayor",
        "may or",
        "x--y",
        "/lead",
        "trail-",
        "ünï",
        "a" * 80,
        "@Alice",
        "@gc_mayor",
        "@gcr_abcdefgh_x",
        "@",
        "@all",
        "e\u0301",
    ],
)
def test_other_addresses_decode_through_the_display(address):
    box = mailbox(address)
    acting = agent(box, TAG)
    for name in (box, acting):
        assert NAME_RE.fullmatch(name), name
        assert needs_display(name)
        assert address_of(name, address) == address
    assert address_of(box, "someone else") == box  # a display that does not belong to the mailbox is not trusted


@pytest.mark.parametrize("address", ["x" * 58, "z" * 50 + "/" + "q" * 5])
def test_long_plain_addresses_agents_are_digests_that_name_their_mailbox_through_the_module(address):
    box = mailbox(address)  # a plain mailbox whose agent name would pass 64 characters
    acting = agent(box, TAG)
    assert box.startswith("gc_") and address_of(box) == address
    assert len(acting) <= 64 and mailbox_of(acting) is None and needs_display(acting)
    assert address_of(acting, address) == address


def test_thrum_agents_show_as_at_names_and_act_for_themselves():
    assert address_of("alice") == "@alice" and address_of("alice", "Alice Smith") == "@alice"
    assert mailbox("@alice") == "alice" and agent("alice", TAG) == "alice"
    assert not addresses.is_mailbox("alice") and addresses.is_mailbox("gc_alice")
    assert addresses.is_gc_agent(agent("gc_alice", TAG))


def test_clerks_name_their_mailbox_too_and_never_collide():
    for address in ("mayor", "Mayor Of Town", "x" * 58):
        box = mailbox(address)
        mine, clerk = agent(box, TAG), agent(box, TAG, clerk=True)
        assert mine != clerk and clerk.startswith("gck_") and NAME_RE.fullmatch(clerk)
        assert mailbox_of(clerk) == mailbox_of(mine)
        assert address_of(clerk, address) == address


def test_reserved_names_stay_reserved():
    assert [name for name in sorted(RESERVED_NAMES) if addresses.is_thrum_name(name)] == []


@pytest.mark.parametrize("address", ["", "   ", "x" * 257])
def test_empty_or_overlong_addresses_are_refused(address):
    with pytest.raises(AddressError):
        mailbox(address)


address_text = st.one_of(
    st.text(min_size=1, max_size=80).filter(lambda a: a.strip()),
    st.from_regex(r"[a-z0-9]{1,6}([-/._][a-z0-9]{1,6}){0,5}", fullmatch=True),
    st.from_regex(r"@[a-z0-9_]{1,20}", fullmatch=True),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(address_text, min_size=2, max_size=6, unique=True))
def test_distinct_addresses_get_distinct_valid_names_that_round_trip(batch):
    boxes = [mailbox(a) for a in batch]
    assert len(set(boxes)) == len(boxes)
    gc_boxes = [b for b in boxes if addresses.is_mailbox(b)]  # thrum agents (@name) act for themselves
    acting = [agent(b, TAG) for b in gc_boxes] + [agent(b, OTHER_TAG) for b in gc_boxes]
    assert len(set(acting)) == len(acting)  # one agent per mailbox and machine
    assert not set(acting) & set(boxes)
    for address, box in zip(batch, boxes):
        assert NAME_RE.fullmatch(box) and box not in RESERVED_NAMES
        assert mailbox(address) == box  # deterministic
        for name in (box, agent(box, TAG)):
            assert NAME_RE.fullmatch(name)
            assert address_of(name, address if needs_display(name) else None) == address
