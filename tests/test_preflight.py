"""What the run checks of its target before sending (llmload/loadtest/preflight.py), as pure functions."""

import pytest

from llmload.errors import ConfigError, LoadTestError
from llmload.loadtest.preflight import check_target_plays
from llmload.timescale import TimeScale, resolve_time_scale

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it

PLAYING = {"rehearsal": True, "gpu_profile": "h100", "speedup": 4.0}


def test_the_web_ui_form_cannot_change_what_a_running_built_in_target_plays():
    check_target_plays("H100", PLAYING)
    with pytest.raises(LoadTestError, match="GPU=a100: the built-in target plays h100"):
        check_target_plays("a100", PLAYING)
    check_target_plays("a100", {"gpu_profile": None})  # a real server: nothing to check


def test_a_run_takes_its_time_scale_from_its_target_once():
    """SPEEDUP left at 1 against a sped-up target takes the target's (and says so); another one is refused; a real
    server runs at 1, and SPEEDUP for it is refused."""
    adopted = resolve_time_scale(1.0, {**PLAYING, "host": "http://sim"})
    assert adopted.speedup == 4.0 and adopted.adopted_from_target and "takes it" in adopted.adopted_text()
    same = resolve_time_scale(4.0, PLAYING)
    assert same.speedup == 4.0 and same.adopted_text() is None
    with pytest.raises(ConfigError, match="SPEEDUP=8: the built-in target at http://sim runs at SPEEDUP 4"):
        resolve_time_scale(8.0, {**PLAYING, "host": "http://sim"})
    assert resolve_time_scale(1.0, {"rehearsal": False}) == TimeScale()
    with pytest.raises(ConfigError, match="SPEEDUP=4 rehearses against the built-in target; http://gpu is a real server"):
        resolve_time_scale(4.0, {"rehearsal": False, "host": "http://gpu"})


def test_one_time_scale_converts_every_kind():
    scale = TimeScale(20.0)
    assert [scale.played(1.0, kind) for kind in ("time", "rate", "money", "share", "count")] == [20.0, 0.05, 20.0, 1.0, 1.0]
    assert (scale.target_s(60.0), scale.target_rate(2.0)) == (3.0, 40.0)
    assert scale.played_interval([1.0, 2.0], "rate") == [0.05, 0.1]
