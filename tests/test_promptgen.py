"""Prompt generation: token targets, determinism, diversity, and template errors with file and line."""

import shutil
from pathlib import Path

import pytest

from llmload.errors import ConfigError
from llmload.promptsets.generate import TemplateError, generate_set, load_templates
from llmload.promptsets.write import shared_prefix_tokens, write_prompt_sets
from llmload.promptsets.tokens import prompt_tokens

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it

FIXTURES = Path(__file__).parent / "fixtures" / "templates"


@pytest.fixture(scope="module")
def demo():
    return load_templates(FIXTURES)


@pytest.mark.parametrize("size,target", [("2k", 2000), ("8k", 8000)])
def test_every_prompt_lands_within_one_percent_and_counts_are_exact(demo, size, target):
    lines = list(generate_set(demo, size, target, 40, seed=3))
    for line in lines:
        assert abs(line["prompt_tokens"] - target) <= target * 0.01
        assert line["prompt_tokens"] == prompt_tokens(line["messages"])
        assert line["target_tokens"] == target and line["template"] == "demo.en"
    assert len({line["messages"][0]["content"] for line in lines}) == len(lines)


def test_same_seed_same_prompts_other_seed_other_prompts(demo):
    first = list(generate_set(demo, "2k", 2000, 10, seed=1))
    assert first == list(generate_set(demo, "2k", 2000, 10, seed=1))
    assert first[5] == list(generate_set(demo, "2k", 2000, 6, seed=1, start=5))[0]  # each prompt stands alone
    other = list(generate_set(demo, "2k", 2000, 10, seed=2))
    assert all(a["messages"] != b["messages"] for a, b in zip(first, other))


def copy_fixture(tmp_path: Path) -> Path:
    root = tmp_path / "templates"
    shutil.copytree(FIXTURES, root)
    return root


def test_syntax_error_names_file_and_line(tmp_path):
    root = copy_fixture(tmp_path)
    unit = root / "demo" / "unit.en.j2"
    unit.write_text("line one\n{{ u.who }\n")
    with pytest.raises(TemplateError, match=rf"{unit}:2: "):
        load_templates(root)


def test_undefined_variable_names_file_and_line(tmp_path):
    root = copy_fixture(tmp_path)
    prompt = root / "demo" / "prompt.en.j2"
    prompt.write_text("Instructions.\nCustomer: {{ ctx.no_such_field }}\n{% for u in units %}{{ u }}\n{% endfor %}")
    templates = load_templates(root)
    with pytest.raises(TemplateError, match=rf"{prompt}:2: UndefinedError"):
        list(generate_set(templates, "2k", 2000, 1, seed=0))


def test_missing_pools_are_named(tmp_path):
    root = copy_fixture(tmp_path)
    (root / "demo" / "pools.en.json").unlink()
    with pytest.raises(TemplateError, match="pools.en.json is missing"):
        load_templates(root)


def test_shared_prefix_counts_the_common_instructions():
    common = "You are a support lead. Read the thread and reply.\n"
    prompts = [[{"role": "user", "content": common + tail}] for tail in ("Alpha beta", "Gamma delta", "Zeta")]
    shared = shared_prefix_tokens(prompts)
    header = prompt_tokens([{"role": "user", "content": ""}]) - 3  # everything before the user's text
    assert all(n >= header + 10 for n in shared)
    assert shared_prefix_tokens([prompts[0]]) == [0]


def test_an_unknown_size_is_refused_before_any_worker_starts(tmp_path):
    with pytest.raises(ConfigError, match="SIZES: unknown size 3k"):
        write_prompt_sets(["3k"], 30, 7, FIXTURES, tmp_path / "c")
