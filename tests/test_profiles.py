"""The built-in target's profile files: what ships, where each came from, and bad files named by their field."""

import json

import pytest

from llmload.errors import ProfileError
from llmload.sim.profiles import GPUS, MODELS, PROFILES_DIR, load_profile, lookup_profile, profile_to_dict, shipped_profiles

pytestmark = pytest.mark.pure


def test_every_shipped_profile_loads_and_says_where_it_came_from():
    names = shipped_profiles()
    assert {"h200-gpt-oss-20b-bf16", "a100-gpt-oss-120b"} <= set(names)
    for name in names:
        p = load_profile(name)
        assert p.name == name and p.kind in ("measured", "extrapolated") and len(p.source) > 80
        if p.kind == "measured":
            assert p.source.startswith("MEASURED") and p.fit["cells"] and "calibrate" in p.fit["command"]
        else:
            assert p.source.startswith("EXTRAPOLATED") and p.fit["ratios"]


def test_the_measured_profiles_are_the_measured_configurations():
    h200 = load_profile("h200-gpt-oss-20b-bf16")
    assert (h200.gpu, h200.model, h200.weights, h200.kind) == ("h200", "gpt-oss-20b", "bf16-dummy", "measured")
    assert (h200.engine.max_num_seqs, h200.engine.max_num_batched_tokens, h200.engine.kv_capacity_tokens) == (1024, 8192, 2_187_046)
    a100 = load_profile("a100-gpt-oss-120b")
    assert (a100.gpu, a100.model, a100.weights, a100.kind) == ("a100", "gpt-oss-120b", "mxfp4", "measured")
    assert (a100.engine.max_num_seqs, a100.engine.max_num_batched_tokens) == (256, 2048)  # vLLM's A100 defaults


def test_gpu_labels_play_mxfp4_profiles():
    for gpu in GPUS:
        for model in MODELS:
            if (gpu, model) == ("l4", "gpt-oss-120b"):
                with pytest.raises(ProfileError, match="does not fit on l4"):
                    lookup_profile(gpu, model)
                continue
            p = lookup_profile(gpu, model)
            assert (p.gpu, p.model, p.weights) == (gpu, model, "mxfp4")
            assert p.kind == ("measured" if (gpu, model) == ("a100", "gpt-oss-120b") else "extrapolated")


def _broken(tmp_path, change) -> str:
    data = json.loads((PROFILES_DIR / "h100-gpt-oss-20b.json").read_text())
    change(data)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("change,words", [
    (lambda d: d["step"].pop("token_s"), "step.token_s is missing"),
    (lambda d: d["engine"].update(max_num_seqs="many"), "engine.max_num_seqs must be a whole number, got 'many'"),
    (lambda d: d["engine"].update(kv_capacity_tokens=0), "engine.kv_capacity_tokens must be a positive whole number"),
    (lambda d: d["frontend"].update(output_token_s=-1.0), "frontend.output_token_s must be a non-negative number"),
    (lambda d: d.update(kind="guessed"), "kind must be one of measured, extrapolated"),
    (lambda d: d.update(schema_version=2), "schema_version 2 is not 1"),
    (lambda d: d.pop("source"), "source is missing"),
    (lambda d: d["engine"].update(max_num_batched_tokens=8), "must be at least engine.max_num_seqs"),
])
def test_a_malformed_profile_is_one_line_naming_the_field(tmp_path, change, words):
    path = _broken(tmp_path, change)
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    assert str(e.value).startswith(f"PROFILE={path}: ") and words in str(e.value) and "\n" not in str(e.value)


def test_missing_and_unknown_profiles_say_what_exists(tmp_path):
    with pytest.raises(ProfileError, match="cannot be read"):
        load_profile(str(tmp_path / "nope.json"))
    with pytest.raises(ProfileError, match="no such shipped profile; give one of a100-gpt-oss-120b"):
        load_profile("b200-gpt-oss-20b")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ProfileError, match="not valid JSON"):
        load_profile(str(tmp_path / "bad.json"))


def test_a_profile_survives_writing_and_reading(tmp_path):
    p = load_profile("h200-gpt-oss-20b-bf16")
    (tmp_path / "copy.json").write_text(json.dumps(profile_to_dict(p)))
    assert load_profile(str(tmp_path / "copy.json")) == p
