"""`make prompts` through the CLI with the shipped templates: every set line is valid and exact."""

import json
import re

import pytest

from conftest import REPO, run_cli
from llmload.promptsets.catalog import load_prompt_set
from llmload.promptsets.generate import load_templates
from llmload.promptsets.tokens import prompt_tokens
from llmload.promptsets.write import write_prompt_sets

# An unfilled fill() placeholder; Apache HttpClient's literal "{s}->https://..." in log lines is content.
PLACEHOLDER = re.compile(r"\{[a-z_]+(:-?\d+:-?\d+)?\}(?!->)")


@pytest.fixture(scope="module")
def small_sets(tmp_path_factory):
    out = tmp_path_factory.mktemp("prompts")
    done = run_cli("prompts", "COUNT=60", "SEED=5", f"OUT={out}", timeout_s=300)
    assert done.returncode == 0, done.stderr
    return out, done.stdout


@pytest.mark.pure
def test_shipped_templates_cover_three_tasks_in_two_languages():
    names = {t.name for t in load_templates(REPO / "templates")}
    assert names == {f"{task}.{lang}" for task in ("support_reply", "product_description", "incident_triage") for lang in ("en", "ja")}


@pytest.mark.integration
@pytest.mark.parametrize("size,target", [("2k", 2000), ("4k", 4000), ("8k", 8000)])
def test_every_line_is_complete_exact_and_within_one_percent(small_sets, size, target):
    out, stdout = small_sets
    lines = [json.loads(line) for line in (out / f"{size}.jsonl").read_text().splitlines()]
    assert len(lines) == 60 and f"{size}.jsonl: 60 prompts" in stdout
    for line in lines:
        assert {"id", "template", "messages", "target_tokens", "prompt_tokens"} <= line.keys()
        assert line["target_tokens"] == target and abs(line["prompt_tokens"] - target) <= target // 100
        assert line["prompt_tokens"] == prompt_tokens(line["messages"])
        assert not PLACEHOLDER.search(line["messages"][0]["content"])
    assert len({line["messages"][0]["content"] for line in lines}) == 60
    assert len({line["template"] for line in lines}) == 6
    stats = json.loads((out / f"{size}.stats.json").read_text())
    assert stats["count"] == 60 and stats["shared_prefix_tokens_mean"] > 200  # the shared instructions
    assert len(load_prompt_set(str(out / f"{size}.jsonl"))) == 60


@pytest.mark.integration
def test_written_sets_are_deterministic_and_have_stats(tmp_path):
    """write_prompt_sets itself (a pool of worker processes), on the small fixture templates."""
    fixtures = REPO / "tests" / "fixtures" / "templates"
    first = write_prompt_sets(["2k"], 30, 7, fixtures, tmp_path / "a")
    write_prompt_sets(["2k"], 30, 7, fixtures, tmp_path / "b")
    assert (tmp_path / "a" / "2k.jsonl").read_bytes() == (tmp_path / "b" / "2k.jsonl").read_bytes()
    stats = first[0]
    assert stats.count == 30 and stats.max_deviation_ratio <= 0.01 and stats.shared_prefix_tokens_mean > 90
    assert (tmp_path / "a" / "2k.stats.json").exists()


@pytest.mark.integration
def test_verify_against_a_server_tokenize(small_sets, sim_fixed):
    out, _ = small_sets
    done = run_cli("prompts", "SIZES=2k", "COUNT=60", "SEED=5", f"OUT={out}", f"VERIFY={sim_fixed}", timeout_s=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all counts equal" in done.stdout


@pytest.mark.pure
def test_bad_template_folder_is_one_line(cli, tmp_path):
    done = cli("prompts", f"TEMPLATES={tmp_path}", f"OUT={tmp_path / 'out'}")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "holds no */prompt.LANG.j2 templates" in done.stderr
