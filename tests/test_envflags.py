"""Environment flags: one rule for every THRUM_* switch, so no two modules disagree."""

from __future__ import annotations

import pytest

from thrum import config, envflags, lifecycle

OFF = ["", "0", "false", "False", "no", "NO", "off", " 0 "]
ON = ["1", "true", "yes", "on", "TRUE", "2"]


@pytest.mark.parametrize("value", OFF)
def test_off_values_turn_every_flag_off(value):
    assert not envflags.flag("X", {"X": value})
    assert not lifecycle.autostart_disabled({"THRUM_NO_AUTOSTART": value})
    assert config.load(None, {"THRUM_LOCAL": value}).local_only is False


@pytest.mark.parametrize("value", ON)
def test_other_values_turn_every_flag_on(value):
    assert envflags.flag("X", {"X": value})
    assert lifecycle.autostart_disabled({"THRUM_NO_AUTOSTART": value})
    assert config.load(None, {"THRUM_LOCAL": value}).local_only is True


def test_an_unset_flag_is_off():
    assert not envflags.flag("THRUM_SURELY_UNSET", {})


def test_an_offline_syncs_full_repack_is_detached_unless_turned_off(tmp_path):
    """`thrum sync` from cron returns before its full repack (git's gc.autoDetach) unless the
    config or THRUM_TIDY_DETACH says to run it inline; any other value in the file is refused."""
    assert config.load(None, {}).tidy_detach is True
    assert config.load(None, {"THRUM_TIDY_DETACH": "0"}).tidy_detach is False
    path = tmp_path / "config.json"
    path.write_text('{"tidy_detach": false}')
    assert config.load(path, {}).tidy_detach is False
    path.write_text('{"tidy_detach": "sometimes"}')
    with pytest.raises(config.ValidationError, match="tidy_detach must be true or false"):
        config.load(path, {})
