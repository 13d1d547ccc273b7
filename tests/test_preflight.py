"""What the run checks of its target before sending (llmload/loadtest/preflight.py), as pure functions."""

import pytest

from llmload.errors import LoadTestError
from llmload.loadtest.preflight import check_target_plays

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it

PLAYING = {"rehearsal": True, "gpu_profile": "h100", "speedup": 4.0}


def test_the_web_ui_form_cannot_change_what_a_running_built_in_target_plays():
    check_target_plays("H100", 1.0, PLAYING)  # SPEEDUP left at 1: the target's own
    check_target_plays("h100", 4.0, PLAYING)
    with pytest.raises(LoadTestError, match="GPU=a100: the built-in target plays h100"):
        check_target_plays("a100", 1.0, PLAYING)
    with pytest.raises(LoadTestError, match="SPEEDUP=8: the built-in target runs at SPEEDUP 4"):
        check_target_plays("h100", 8.0, PLAYING)
    check_target_plays("a100", 8.0, {"gpu_profile": None})  # a real server: nothing to check
