"""The Web UI's access rules on their own: login codes, the session's two halves, Origin and Host."""

from __future__ import annotations

from thrum.ui.access import CODE_TTL, MAX_CODES, SESSION_TTL, UiAccess


class Clock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def _signed_in(access: UiAccess) -> tuple[str, str]:
    """(the Cookie header a browser sends after a login, the page key it keeps)."""
    login = access.new_login()
    session = access.redeem(login.code)
    assert session == login.session
    return access.set_cookie(session).split(";")[0], login.key


def test_a_login_code_works_once():
    access = UiAccess()
    access.port = 8123
    login = access.new_login()
    assert access.redeem(login.code) == login.session
    assert access.redeem(login.code) is None
    assert access.redeem("") is None
    assert access.redeem(None) is None
    assert access.redeem("made-up") is None


def test_a_login_code_expires():
    clock = Clock()
    access = UiAccess(clock=clock)
    access.port = 8123
    late = access.new_login()
    clock.now += CODE_TTL + 1
    fresh = access.new_login()
    assert access.redeem(late.code) is None
    assert access.redeem(fresh.code) == fresh.session


def test_unredeemed_codes_are_bounded_oldest_forgotten_first():
    access = UiAccess()
    access.port = 8123
    logins = [access.new_login() for _ in range(MAX_CODES + 5)]
    assert access.redeem(logins[0].code) is None
    assert access.redeem(logins[-1].code) is not None


def test_the_cookie_is_one_half_and_the_page_key_the_other():
    access = UiAccess()
    access.port = 8123
    cookie, key = _signed_in(access)
    header = access.set_cookie(key.rsplit(".", 1)[0])
    pair, *attrs = [p.strip() for p in header.split(";")]
    assert pair.startswith("thrum_ui_8123_")
    assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= set(attrs)
    assert access.signed_in(cookie) and access.signed_in(f"other=1; {cookie}; more=2")
    assert access.admits(cookie, key) and access.admits(f"other=1; {cookie}", key)
    assert not access.admits(cookie, None) and not access.admits(cookie, "")  # the cookie alone: no
    assert not access.admits(None, key) and not access.admits("", key)  # the key alone: no
    assert not access.admits(cookie, key[:-1] + ("A" if key[-1] != "A" else "B"))
    assert key.rsplit(".", 1)[1] not in cookie  # neither half gives the other
    # another login's key does not fit this cookie
    _, other_key = _signed_in(access)
    assert not access.admits(cookie, other_key)


def test_another_secret_or_port_is_another_ui():
    access, other = UiAccess(), UiAccess()
    access.port = other.port = 8123
    cookie, key = _signed_in(other)
    assert not access.signed_in(cookie) and not access.admits(cookie, key)
    moved = UiAccess(other.secret)
    moved.port = 8124
    assert not moved.admits(cookie, key)  # the cookie is named for its port
    same = UiAccess(other.secret)
    same.port = 8123
    assert same.admits(cookie, key)  # the same secret (a restarted daemon): still valid


def test_rotating_the_secret_ends_every_session():
    access = UiAccess()
    access.port = 8123
    cookie, key = _signed_in(access)
    pending = access.new_login()
    access.rotate()
    assert not access.admits(cookie, key) and not access.signed_in(cookie)
    assert access.redeem(pending.code) is None


def test_a_session_ends_after_its_lifetime():
    wall = Clock(1_800_000_000.0)
    access = UiAccess(wall=wall)
    access.port = 8123
    cookie, key = _signed_in(access)
    wall.now += SESSION_TTL - 60
    assert access.admits(cookie, key)
    wall.now += 120
    assert not access.admits(cookie, key) and not access.signed_in(cookie)
    dead = access.sessions_in(cookie)[1]
    assert dead == [cookie.split("=")[0]]  # named, so the next login can delete it


def test_the_key_is_found_among_the_offered_subprotocols():
    assert UiAccess.key_in(["thrum", "thrum-key.S.K"]) == "S.K"
    assert UiAccess.key_in(["thrum"]) is None and UiAccess.key_in([]) is None
    assert UiAccess.key_in(["thrum-key."]) is None


def test_origins_and_hosts_are_exactly_the_uis_own():
    access = UiAccess()
    assert access.origins == frozenset() and not access.host_ok("127.0.0.1:8123")
    access.port = 8123
    assert access.origins == {"http://127.0.0.1:8123", "http://localhost:8123"}
    assert access.host_ok("127.0.0.1:8123") and access.host_ok("LOCALHOST:8123")
    for host in ("127.0.0.1", "127.0.0.1:8124", "evil.example:8123", "127.0.0.1.nip.io:8123", None, ""):
        assert not access.host_ok(host), host
