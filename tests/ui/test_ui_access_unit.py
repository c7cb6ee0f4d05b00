"""The Web UI's access rules on their own: login codes, the cookie, Origin and Host."""

from __future__ import annotations

from thrum.ui.access import CODE_TTL, MAX_CODES, UiAccess


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_login_code_works_once():
    access = UiAccess()
    access.port = 8123
    code = access.new_code()
    assert access.redeem(code)
    assert not access.redeem(code)
    assert not access.redeem("")
    assert not access.redeem(None)
    assert not access.redeem("made-up")


def test_a_login_code_expires():
    clock = Clock()
    access = UiAccess(clock=clock)
    access.port = 8123
    late, fresh = access.new_code(), None
    clock.now += CODE_TTL + 1
    fresh = access.new_code()
    assert not access.redeem(late)
    assert access.redeem(fresh)


def test_unredeemed_codes_are_bounded_oldest_forgotten_first():
    access = UiAccess()
    access.port = 8123
    codes = [access.new_code() for _ in range(MAX_CODES + 5)]
    assert not access.redeem(codes[0])
    assert access.redeem(codes[-1])


def test_the_cookie_carries_the_secret_under_a_per_port_name():
    access = UiAccess()
    access.port = 8123
    header = access.set_cookie()
    pair, *attrs = [p.strip() for p in header.split(";")]
    assert pair.startswith("thrum_ui_8123=")
    assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= set(attrs)
    assert access.admits(pair)
    assert access.admits(f"other=1; {pair}; more=2")
    # another daemon's UI (another port, another secret) is not this one's
    other = UiAccess()
    other.port = 8124
    assert not access.admits(other.set_cookie().split(";")[0])
    assert not access.admits(pair.replace("thrum_ui_8123", "thrum_ui_8124"))
    assert not access.admits(pair[:-1] + ("A" if pair[-1] != "A" else "B"))
    assert not access.admits(None) and not access.admits("")


def test_a_new_daemon_start_has_a_new_secret():
    a, b = UiAccess(), UiAccess()
    a.port = b.port = 8123
    assert not b.admits(a.set_cookie().split(";")[0])


def test_origins_and_hosts_are_exactly_the_uis_own():
    access = UiAccess()
    assert access.origins == frozenset() and not access.host_ok("127.0.0.1:8123")
    access.port = 8123
    assert access.origins == {"http://127.0.0.1:8123", "http://localhost:8123"}
    assert access.host_ok("127.0.0.1:8123") and access.host_ok("LOCALHOST:8123")
    for host in ("127.0.0.1", "127.0.0.1:8124", "evil.example:8123", "127.0.0.1.nip.io:8123", None, ""):
        assert not access.host_ok(host), host
