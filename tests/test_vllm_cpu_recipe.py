"""The tiny models' cache key (llmload/vllm_cpu/launcher.py): a model is rebuilt exactly when its recipe changes."""

import pytest
import shutil

from conftest import REPO
from llmload.vllm_cpu.launcher import model_folder, training_prose

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it


def test_the_training_prose_is_the_suites_templates():
    prose = training_prose()
    assert prose and all(path.is_relative_to(REPO / "templates") for path in prose)
    assert {path.suffix for path in prose} >= {".j2", ".json"}


def test_a_model_is_rebuilt_when_its_training_prose_changes(tmp_path):
    copy = tmp_path / "templates"
    shutil.copytree(REPO / "templates", copy)
    prose, copied = training_prose(), training_prose(copy)
    # The same bytes elsewhere are the same recipe: the cached model is reused.
    assert model_folder("tiny-gptoss", copied) == model_folder("tiny-gptoss", prose)
    copied[0].write_text(copied[0].read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert model_folder("tiny-gptoss", copied) != model_folder("tiny-gptoss", prose)
    assert model_folder("tiny-llama", prose) != model_folder("tiny-gptoss", prose)
