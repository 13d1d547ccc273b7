"""The tiny models' cache key (llmload/vllm_cpu/launcher.py): a model is rebuilt exactly when its recipe changes."""

import ast
import shutil
from pathlib import Path

import pytest

from conftest import REPO
from llmload.vllm_cpu import launcher
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


def test_the_recipe_holds_every_suite_module_the_build_imports():
    script = REPO / "llmload" / "vllm_cpu" / "build_model.py"
    imported = {node.module for node in ast.walk(ast.parse(script.read_text())) if isinstance(node, ast.ImportFrom)
                and node.module and node.module.startswith("llmload")}
    assert imported, "build_model.py imports the shared tokenizer module"
    modules = {REPO.joinpath(*module.split(".")).with_suffix(".py") for module in imported}
    assert {p.resolve() for p in launcher._BUILD_CODE} == modules | {script}


def test_a_model_is_rebuilt_when_the_build_code_changes(tmp_path, monkeypatch):
    prose = training_prose()
    before = model_folder("tiny-gptoss", prose)
    code = launcher._BUILD_CODE
    for index, path in enumerate(code):
        copies = tuple(Path(shutil.copy(p, tmp_path / f"{i}-{p.name}")) for i, p in enumerate(code))
        monkeypatch.setattr(launcher, "_BUILD_CODE", copies)
        assert model_folder("tiny-gptoss", prose) == before  # the same bytes elsewhere: the same recipe
        copies[index].write_text(path.read_text() + "\n")
        assert model_folder("tiny-gptoss", prose) != before, path.name


def test_two_suites_needing_one_model_build_it_once(tmp_path):
    """Tests, helpers and a user's make may need the same model at once: the second waits for the first's build
    (a lock file beside the folder) instead of building into the same .partial folder."""
    import threading

    folder = tmp_path / "models" / "tiny-gptoss-abc"
    entered = threading.Event()

    def second_builder() -> None:
        with launcher._built_once(folder):
            entered.set()

    with launcher._built_once(folder):
        waiter = threading.Thread(target=second_builder)
        waiter.start()
        waiter.join(0.2)
        assert not entered.is_set()  # held: the second builder waits
    waiter.join(5)
    assert entered.is_set()
