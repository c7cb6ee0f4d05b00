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
