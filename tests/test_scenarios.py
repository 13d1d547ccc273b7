"""Scenario files: the shipped studies load as the seeds describe them; mistakes give one clear line."""

import hashlib
import itertools
import json
from pathlib import Path

import pytest

from llmload.errors import ConfigError
from llmload.options import option_by_key
from llmload.settings import parse_duration_s
from llmload.sweep.scenarios import Scenario, ScenarioError, cell_key, cell_options, load_scenario, make_cell

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
SHIPPED = {"h100-grid": 90, "a100-l4": 30, "output-tokens": 6, "max-tokens": 4, "a100-tuning": 6, "conversations": 10,
           "trace-speeds": 4, "api-structured": 12}
MODELS = ["gpt-oss-20b", "gpt-oss-120b"]
EFFORTS = ["low", "medium", "high"]
USERS = ["1", "2", "4", "8", "16"]


def shipped(name: str) -> Scenario:
    return load_scenario(SCENARIOS / f"{name}.yaml")


def write(tmp_path: Path, text: str, name: str = "x.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def expected_key(settings: dict[str, str]) -> str:
    canonical = json.dumps(settings, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


# --- the shipped scenarios ---------------------------------------------------------------------

def test_every_yaml_in_scenarios_is_a_shipped_one():
    assert sorted(p.stem for p in SCENARIOS.glob("*.yaml")) == sorted(SHIPPED)


@pytest.mark.parametrize("name,count", SHIPPED.items())
def test_shipped_scenario_loads_with_its_cell_count(name, count, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no prompts/ or data/ here: loading must not read prompt files
    scenario = load_scenario(SCENARIOS / f"{name}.yaml")
    assert scenario.name == name and scenario.description and scenario.server["engine"] == "vllm"
    assert len(scenario.cells) == count
    assert [c.index for c in scenario.cells] == list(range(count))
    for cell in scenario.cells:
        assert cell.key == expected_key(cell.settings) and len(cell.key) == 12
        assert all(isinstance(v, str) for v in cell.settings.values())
        cell_options(cell.settings)  # every cell is a valid `python -m llmload load` command, as the sweep runs it
        assert "{" not in "".join(cell.server.values()), cell.server
        assert cell.label and len(cell.label) <= 60


def test_keys_are_unique_across_all_shipped_scenarios():
    keys = [c.key for name in SHIPPED for c in shipped(name).cells]
    assert len(keys) == len(set(keys))


def test_keys_are_stable_across_runs_and_files(tmp_path):
    cell = shipped("h100-grid").cells[0]
    assert cell.settings == {"DURATION": "120s", "MODEL": "gpt-oss-20b", "PROMPTS": "2k", "EFFORT": "low", "USERS": "1", "GPU": "h100"}
    assert cell.key == "035183be0096"  # a golden value: changing how keys are made orphans finished results
    # the same settings written another way (other order, in cells, with numbers) give the same key
    other = write(tmp_path, "cells:\n  - {USERS: 1, EFFORT: low, GPU: h100, PROMPTS: 2k, MODEL: gpt-oss-20b, DURATION: 120s}\n")
    assert load_scenario(other).cells[0].key == cell.key
    assert load_scenario(SCENARIOS / "h100-grid.yaml").cells[0].key == cell.key


def test_h100_grid_order_is_the_cartesian_product_first_key_slowest():
    scenario = shipped("h100-grid")
    order = [(c.settings["MODEL"], c.settings["PROMPTS"], c.settings["EFFORT"], c.settings["USERS"]) for c in scenario.cells]
    assert order == list(itertools.product(MODELS, ["2k", "4k", "8k"], EFFORTS, USERS))
    assert all(c.settings["GPU"] == "h100" and c.settings["DURATION"] == "120s" and c.duration_s == 120 for c in scenario.cells)


def test_labels_name_what_varies():
    h100 = shipped("h100-grid").cells
    assert h100[0].label == "gpt-oss-20b 2k low u1"
    assert [c.label for c in h100 if c.settings == {**h100[0].settings, "MODEL": "gpt-oss-120b", "PROMPTS": "4k", "EFFORT": "high", "USERS": "8"}] \
        == ["gpt-oss-120b 4k high u8"]
    assert shipped("a100-l4").cells[-1].label == "l4 gpt-oss-20b high u16"
    assert [c.label for c in shipped("max-tokens").cells] == [f"max_tokens={n}" for n in (100, 200, 400, 800)]
    assert [c.label for c in shipped("output-tokens").cells] == [f"{m} {e}" for m in MODELS for e in EFFORTS]
    assert shipped("a100-tuning").cells[0].label == "sharegpt:1000 u1000 n1000"
    assert shipped("a100-tuning").cells[1].label == "random:128:4:1000 u1000 n1000 seed=42"


def test_server_placeholders_are_filled_per_cell():
    grid = shipped("h100-grid")
    assert grid.server["command"] == "vllm serve openai/{MODEL} --max-model-len=100000 --async-scheduling"
    assert grid.cells[-1].server["command"] == "vllm serve openai/gpt-oss-120b --max-model-len=100000 --async-scheduling"
    assert grid.cells[0].server["version"] == "0.10.1+gptoss"
    pairs = {(c.settings["GPU"], c.settings["MODEL"], c.server["gpu"]) for c in shipped("a100-l4").cells}
    assert pairs == {("a100", "gpt-oss-120b", "a100"), ("l4", "gpt-oss-20b", "l4")}
    for cell in shipped("a100-l4").cells:
        assert cell.server["command"].startswith("VLLM_ATTENTION_BACKEND=TRITON_ATTN_VLLM_V1 vllm serve openai/" + cell.settings["MODEL"])


def test_a100_l4_is_4k_with_the_grids_efforts_and_users():
    cells = shipped("a100-l4").cells
    assert {c.settings["PROMPTS"] for c in cells} == {"4k"}
    assert [(c.settings["EFFORT"], c.settings["USERS"]) for c in cells[:15]] == list(itertools.product(EFFORTS, USERS))
    assert [c.duration_s for c in cells] == [120.0] * 30


def test_output_tokens_sends_the_same_500_prompts_one_at_a_time():
    scenario = shipped("output-tokens")
    for cell in scenario.cells:
        assert {k: cell.settings[k] for k in ("PROMPTS", "ORDER", "USERS", "REQUESTS")} == {"PROMPTS": "4k", "ORDER": "sequence", "USERS": "1", "REQUESTS": "500"}
        assert "MAX_TOKENS" not in cell.settings and cell.duration_s is None


def test_max_tokens_cells():
    scenario = shipped("max-tokens")
    assert [c.settings["MAX_TOKENS"] for c in scenario.cells] == ["100", "200", "400", "800"]
    assert {(c.settings["USERS"], c.settings["EFFORT"], c.settings["PROMPTS"], c.settings["DURATION"]) for c in scenario.cells} == {("1", "medium", "4k", "120s")}
    assert [c.duration_s for c in scenario.cells] == [120.0] * 4


def test_a100_tuning_reproduces_the_bench_cases():
    scenario = shipped("a100-tuning")
    cases = [(c.settings["PROMPTS"], c.settings["USERS"], c.settings["REQUESTS"]) for c in scenario.cells]
    sharegpt = "sharegpt:data/ShareGPT_V3_unfiltered_cleaned_split.json"
    assert cases == [(f"{sharegpt}:1000", "1000", "1000"), ("random:128:4:1000", "1000", "1000"), ("random:2000:100:500", "500", "500"),
                     ("random:4000:200:500", "500", "500"), ("random:32000:100:100", "100", "100"), (f"{sharegpt}:100", "4", "100")]
    for cell in scenario.cells:
        assert cell.settings["MODEL"] == "gpt-oss-120b" and cell.settings["GPU"] == "a100" and cell.settings["ORDER"] == "sequence"
    assert scenario.server["command"] == "vllm serve openai/gpt-oss-120b --max-model-len 32768"
    text = (SCENARIOS / "a100-tuning.yaml").read_text()
    assert "--async-scheduling --max-num-batched-tokens 4096" in text and "data/ShareGPT_V3_unfiltered_cleaned_split.json" in scenario.description


# --- the format ----------------------------------------------------------------------------------

def test_grid_then_cells_merged_over_defaults(tmp_path):
    path = write(tmp_path, """
name: mix
server: {gpu: h100, note: "free-form"}
defaults: {PROMPTS: 4k, NONCE: on, EXTRA_BODY: {top_p: 0.9}}
grid:
  GPU+MODEL: [[h100, gpt-oss-120b]]
  USERS: [1, 2]
cells:
  - {PROMPTS: builtin, USERS: 4, REQUESTS: 8, WARMUP_REQUESTS: 2}
""")
    scenario = load_scenario(path)
    assert scenario.path == path and scenario.server == {"gpu": "h100", "note": "free-form"}
    settings = [c.settings for c in scenario.cells]
    assert [s["USERS"] for s in settings] == ["1", "2", "4"]
    assert settings[0]["NONCE"] == "on" and settings[0]["EXTRA_BODY"] == '{"top_p":0.9}'  # YAML's on is a bool
    assert settings[2]["PROMPTS"] == "builtin" and settings[2]["GPU"] == "h100" and settings[2]["WARMUP_REQUESTS"] == "2"
    assert [c.duration_s for c in scenario.cells] == [120.0, 120.0, None]  # DURATION's own default
    assert [c.label for c in scenario.cells] == ["4k gpt-oss-120b u1", "4k gpt-oss-120b u2", "builtin u4 n8 warmup_requests=2"]


def test_name_defaults_to_the_file_stem(tmp_path):
    assert load_scenario(write(tmp_path, "cells: [{USERS: 2}]\n", "my-study.yaml")).name == "my-study"


def test_repeats_is_read_by_the_sweep_and_no_part_of_the_key(tmp_path):
    once = load_scenario(write(tmp_path, "cells:\n  - {USERS: 2}\n  - {USERS: 4}\n", "once.yaml"))
    path = write(tmp_path, "defaults: {REPEATS: 3}\ncells:\n  - {USERS: 2}\n  - {USERS: 4, REPEATS: 1}\n", "repeated.yaml")
    repeated = load_scenario(path)
    assert [c.repeats for c in once.cells] == [1, 1] and [c.repeats for c in repeated.cells] == [3, 1]
    assert [c.key for c in repeated.cells] == [c.key for c in once.cells]  # raising REPEATS keeps the runs made
    assert all("REPEATS" not in c.settings for c in repeated.cells)


BAD = [  # (file text, what the one line must say after "<file>: ")
    ("GRID: {USERS: [1]}\n", "unknown key 'GRID' at top level; allowed: name, description, server, defaults, grid, cells"),
    ("grid:\n  EFFORT: [low, medium, ultra]\n", "grid.EFFORT[2]: EFFORT='ultra' is not one of low, medium, high, none, nor a mix"),
    ("defaults: {USERS: many}\ngrid: {EFFORT: [low]}\n", "defaults.USERS: 'many' is not a whole number"),
    ("grid:\n  EFFORT: [low, high\n  USERS: [1]\n", "line 3: not valid YAML"),
    ("grid: {}\n", "grid: is empty"),
    ("grid:\n  EFFORT: []\n", "grid.EFFORT: is empty; give at least one value"),
    ("grid:\n  EFFORT: high\n", "grid.EFFORT: 'high' is not a list; write [high], or put the one value in defaults"),
    ("cells:\n  - {USERS: 2}\n  - {USERS: 2}\n", "cells[1]: the same settings as cells[0]"),
    ("grid:\n  USERS: [1, 2, 1]\n", "grid cell 2 (USERS=1): the same settings as grid cell 0 (USERS=1)"),
    ("defaults: {USERS: 2}\ngrid:\n  USERS: [1, 2]\n", "grid.USERS: USERS is also set in defaults; give a setting in one place"),
    ("grid:\n  MODEL: [a]\n  GPU+MODEL: [[h100, b]]\n", "grid.GPU+MODEL: MODEL is already a grid axis"),
    ("grid:\n  GPU+MODEL: [[h100]]\n", "grid.GPU+MODEL[0]: ['h100'] is not a list of 2 values (GPU, MODEL)"),
    ("defaults: {GPU_COUNT: 8}\ncells: [{}]\n", "defaults.GPU_COUNT: unknown setting 'GPU_COUNT'; known settings: GPU, PROFILE,"),
    ("cells:\n  - {HOST: 'http://x:8000'}\n", "cells[0].HOST: HOST is given to the sweep"),
    ("grid:\n  USERS: [1, 0]\n", "grid.USERS[1]: USERS=0 is out of range: it must be a finite number at least 1"),
    ("defaults: {DURATION: soon}\ngrid: {USERS: [1]}\n", "defaults.DURATION: DURATION='soon' is not a time span"),
    ("cells:\n  - {EXTRA_BODY: '[1]'}\n", "cells[0].EXTRA_BODY: EXTRA_BODY must be a JSON object"),
    ("grid:\n  EFFORT: [low]\n  EFFORT: [high]\n", "line 3: not valid YAML: 'EFFORT' is given twice"),
    ("cells:\n  - {REQUESTS: 10, DURATION: 60s}\n", "cells[0]: DURATION does not apply with REQUESTS"),
    ("cells:\n  - {REQUESTS: 4, USERS: 8}\n", "cells[0]: USERS=8 is more than REQUESTS=4"),
    ("cells:\n  - {REQUESTS: -1}\n", "cells[0].REQUESTS: REQUESTS=-1 is out of range: it must be a finite number at least 0"),
    ("server: {version: 0.10}\ncells: [{}]\n", "server.version: 0.1 is not a string; quote it"),
    ("server: {command: 'vllm serve {MODEL}'}\ncells: [{USERS: 2}]\n", "server: {MODEL} but cells[0] sets no MODEL"),
    ("server: {command: 'vllm serve {MODELL}'}\ncells: [{}]\n", "server.command: {MODELL} names no scenario setting"),
    ("server: {gpu: h100}\ncells: [{GPU: a100}]\n", "cells[0]: GPU 'a100' but server.gpu is 'h100'"),
    ("cells: []\n", "cells: [] is not a non-empty list"),
    ("name: x\n", "no cells: give grid, cells or both"),
    ("", "is empty"),
    ("- USERS: 1\n", "the top level must be a mapping"),
    ("name: 'my grid'\ncells: [{}]\n", "name: 'my grid' is not a plain name"),
    ("cells:\n  - {MODEL: }\n", "cells[0].MODEL: no value; write \"\" for an empty setting"),
    ("cells:\n  - {USERS: [1, 2]}\n", "cells[0].USERS: [1, 2] is not a single value"),
    ("cells:\n  - USERS\n", "cells[0]: must be a mapping of KEY: value, not str 'USERS'"),
    ("grid:\n  REPEATS: [1, 2]\n", "grid.REPEATS: REPEATS runs a cell again, it is no axis; set it in defaults or in a cell"),
    ("defaults: {REPEATS: 0}\ncells: [{}]\n", "defaults.REPEATS: REPEATS=0 must be at least 1"),
    ("cells:\n  - {REPEATS: two}\n", "cells[0].REPEATS: 'two' is not a whole number"),
]


@pytest.mark.parametrize("text,message", BAD, ids=[m[:40] for _, m in BAD])
def test_a_bad_scenario_gives_one_line_naming_the_file_and_key(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    line = str(info.value)
    assert "\n" not in line
    assert line.startswith(f"{path}: {message}"), line
    assert isinstance(info.value, ConfigError)


def test_a_missing_file_is_a_scenario_error(tmp_path):
    with pytest.raises(ScenarioError, match=r"nope\.yaml: cannot be read"):
        load_scenario(tmp_path / "nope.yaml")


def test_a_cell_made_from_settings_takes_its_defaults_from_the_option_table():
    cell = make_cell(3, {"USERS": "4"}, "u4", {})
    assert (cell.index, cell.key, cell.label) == (3, cell_key({"USERS": "4"}), "u4")
    assert cell.duration_s == parse_duration_s(option_by_key("DURATION").default)
    assert make_cell(0, {"USERS": "2", "REQUESTS": "10"}, "", {}).duration_s is None  # the requests end it
    assert make_cell(0, {"DURATION": "2m"}, "", {}).duration_s == 120.0
    ns = cell_options({"USERS": "4"}, "http://127.0.0.1:9", 5.0)
    assert (ns.num_users, ns.host, ns.speedup) == (4, "http://127.0.0.1:9", 5.0)
