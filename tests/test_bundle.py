"""make bundle: PLATFORM's grammar, PART_MB's parts, FREEZE and what is left out, the host's requirement check, pip's
failures read, bad input (pure); a real small bundle from PyPI installed and checked, and one missing a dependency
(integration)."""

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from llmload.bundle.check import Dist, walk
from llmload.bundle.parts import MANIFEST, join_parts, split_file, write_manifest, write_tar
from llmload.bundle.pip import parse_failure, write_stub, Resolved
from llmload.bundle.plan import parse_freeze, parse_platform, split_extra, split_host
from llmload.errors import ConfigError

from conftest import run_cli

MIB = 1024 * 1024


# PLATFORM and PYTHON

@pytest.mark.pure
def test_a_manylinux_tag_implies_every_older_glibc_and_the_legacy_names():
    p = parse_platform("manylinux_2_28_x86_64", "3.12")
    assert p.pip_platforms[0] == "manylinux_2_28_x86_64"
    assert p.pip_platforms == (*[f"manylinux_2_{y}_x86_64" for y in range(28, 4, -1)],
                               "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64")
    assert (p.abi, p.python_minor) == ("cp312", "3.12")
    assert parse_platform("manylinux2014_x86_64", "3.12").pip_platforms == parse_platform("manylinux_2_17_x86_64", "3.12").pip_platforms


@pytest.mark.pure
def test_aarch64_starts_at_glibc_2_17_and_has_no_older_legacy_tags():
    tags = parse_platform("manylinux_2_28_aarch64", "3.11").pip_platforms
    assert tags[-2:] == ("manylinux_2_17_aarch64", "manylinux2014_aarch64") and len(tags) == 13


@pytest.mark.pure
@pytest.mark.parametrize("tag,expected", [
    ("musllinux_1_2_x86_64", ("musllinux_1_2_x86_64", "musllinux_1_1_x86_64")),
    ("linux_x86_64", ("linux_x86_64",)),
    ("win_amd64", ("win_amd64",)),
])
def test_other_platform_families(tag, expected):
    assert parse_platform(tag, "3.12").pip_platforms == expected


@pytest.mark.pure
def test_macos_arm64_takes_universal2_and_no_macos_10():
    tags = parse_platform("macosx_13_0_arm64", "3.12").pip_platforms
    assert tags[:2] == ("macosx_13_0_arm64", "macosx_13_0_universal2") and "macosx_11_0_arm64" in tags
    assert not any(t.startswith("macosx_10_") for t in tags)
    assert "macosx_10_9_x86_64" in parse_platform("macosx_11_0_x86_64", "3.12").pip_platforms


@pytest.mark.pure
def test_the_markers_are_the_hosts_not_this_pythons():
    linux = parse_platform("manylinux_2_28_aarch64", "3.12.3").markers
    assert (linux["python_version"], linux["python_full_version"], linux["sys_platform"], linux["platform_machine"]) == (
        "3.12", "3.12.3", "linux", "aarch64")
    windows = parse_platform("win_amd64", "3.13").markers
    assert (windows["sys_platform"], windows["os_name"], windows["platform_machine"], windows["python_full_version"]) == (
        "win32", "nt", "AMD64", "3.13.0")


@pytest.mark.pure
@pytest.mark.parametrize("tag", ["manylinux_2_28_x86", "manylinux_2_28", "linux", "manylinux_2_16_aarch64",
                                 "macosx_10_15_arm64", "win_amd65", "manylinux2010_aarch64", "cp312"])
def test_an_unknown_platform_names_the_setting_and_the_grammar(tag):
    with pytest.raises(ConfigError, match=r"PLATFORM=.*manylinux_2_Y_<arch>"):
        parse_platform(tag, "3.12")


@pytest.mark.pure
@pytest.mark.parametrize("python", ["3", "python3.12", "3.7", "2.7", "3.12.x", ""])
def test_a_bad_python_version_names_the_setting(python):
    with pytest.raises(ConfigError, match="PYTHON="):
        parse_platform("manylinux_2_28_x86_64", python)


# PART_MB's parts

def _payload(size: int) -> bytes:
    return random.Random(size).randbytes(size)


@pytest.mark.pure
@pytest.mark.parametrize("size,expected", [(2 * MIB + MIB // 2 + 3, [MIB, MIB, MIB // 2 + 3]), (2 * MIB, [MIB, MIB]),
                                           (10, [10])])
def test_parts_have_exact_sizes_and_hashes_and_join_into_the_same_bytes(tmp_path, size, expected):
    data = _payload(size)
    whole = tmp_path / "wheels.tar"
    whole.write_bytes(data)
    pieces = split_file(whole, MIB, tmp_path / "out")
    assert [p.bytes for p in pieces] == expected
    assert [p.file for p in pieces] == [f"wheels.tar.part{i:03d}" for i in range(len(expected))]
    assert sorted(f.name for f in (tmp_path / "out").iterdir()) == [p.file for p in pieces]
    offsets = [sum(expected[:i]) for i in range(len(expected))]
    assert [p.sha256 for p in pieces] == [hashlib.sha256(data[o:o + n]).hexdigest() for o, n in zip(offsets, expected)]
    joined = join_parts(tmp_path / "out", pieces, tmp_path / "joined.tar")
    assert (tmp_path / "joined.tar").read_bytes() == data
    assert (joined.bytes, joined.sha256) == (size, hashlib.sha256(data).hexdigest())


@pytest.mark.pure
def test_the_tar_is_the_same_bytes_for_the_same_wheels_and_the_manifest_leads_with_its_schema(tmp_path):
    for name in ("b-1-py3-none-any.whl", "a-1-py3-none-any.whl"):
        (tmp_path / name).write_bytes(name.encode() * 100)
    first = write_tar(tmp_path.glob("*.whl"), tmp_path / "one.tar")
    second = write_tar(reversed(sorted(tmp_path.glob("*.whl"))), tmp_path / "two.tar")
    assert first.sha256 == second.sha256
    with tarfile.open(tmp_path / "one.tar") as tar:
        assert tar.getnames() == ["wheels/a-1-py3-none-any.whl", "wheels/b-1-py3-none-any.whl"]
    write_manifest(tmp_path, {"whole": first, "parts": [first]})
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    assert list(manifest)[0] == "schema_version" and manifest["parts"][0]["sha256"] == first.sha256


# FREEZE, EXTRA and what is left out

@pytest.mark.pure
def test_freeze_lines_pins_and_bare_names():
    text = ("# pip freeze of the host\n\nTorch==2.11.0\nhuggingface_hub==1.33.0\nnumba\n-e /src/thing\n"
            "mylib @ file:///tmp/mylib-1.0.whl\ntorchvision==0.26.0+cu130  # a local build\n")
    assert parse_freeze(text) == {"torch": "2.11.0", "huggingface-hub": "1.33.0", "numba": None, "mylib": None,
                                  "torchvision": "0.26.0+cu130"}


@pytest.mark.pure
def test_a_freeze_line_that_is_no_freeze_line_is_named():
    with pytest.raises(ConfigError, match=r"FREEZE line 2: 'numpy>=2'"):
        parse_freeze("torch==2.11.0\nnumpy>=2\n")


@pytest.mark.pure
def test_what_the_host_has_is_left_out_and_a_different_version_or_an_extra_bare_name_is_bundled():
    resolved = {"torch": "2.11.0", "numpy": "2.4.6", "numba": "0.65.0", "xgrammar": "0.2.3", "triton": "3.6.0"}
    host = {"torch": "2.11.0", "numpy": "2.5.2", "numba": None, "triton": "3.6"}
    assert split_host(resolved, host) == (["numpy", "xgrammar"], ["numba", "torch", "triton"])
    assert split_host(resolved, host, asked=["numba", "torch"]) == (["numba", "numpy", "xgrammar"], ["torch", "triton"])


@pytest.mark.pure
def test_extra_splits_on_spaces_and_commas_but_keeps_a_specs_own_commas():
    assert split_extra("vllm==0.25.0,pycountry  numpy>=2,<2.5 six") == ["vllm==0.25.0", "pycountry", "numpy>=2,<2.5", "six"]
    assert split_extra("") == []
    with pytest.raises(ConfigError, match="EXTRA: 'vllm=0.25'"):
        split_extra("vllm=0.25")


# the host's requirement check, on synthetic metadata

LINUX = parse_platform("manylinux_2_28_x86_64", "3.12").markers


def _index(*dists: Dist) -> dict[str, Dist]:
    return {d.key: d for d in dists}


VLLM = Dist("vllm", "0.25.0", ("mistral_common[image]>=1.11.5", "xgrammar<1.0.0,>=0.2.1; platform_machine == 'x86_64'",
                               "apache-tvm-ffi==0.1.9", "uvloop; sys_platform != 'win32'", "pandas; extra == 'bench'"),
            "bundle")
MISTRAL = Dist("mistral_common", "1.13.1", ("pydantic-extra-types[pycountry]>=2.10.5",
                                            "opencv-python-headless>=4.0.0; extra == 'opencv'",
                                            "mistral_common[opencv]; extra == 'image'"), "bundle")
EXTRA_TYPES = Dist("pydantic-extra-types", "2.11.1", ("pydantic>=2.5", "pycountry>=23; extra == 'pycountry'"), "bundle")
XGRAMMAR = Dist("xgrammar", "0.2.9", ("apache-tvm-ffi>=0.1.11",), "bundle")
TVM_FFI = Dist("apache-tvm-ffi", "0.1.9", (), "bundle")
PYDANTIC, OPENCV, UVLOOP = Dist("pydantic", "2.14.4"), Dist("opencv-python-headless", "5.1.0.95"), Dist("uvloop", "0.23.0")


@pytest.mark.pure
def test_a_dependency_asked_through_an_extra_and_a_version_conflict_are_each_one_line():
    index = _index(VLLM, MISTRAL, EXTRA_TYPES, XGRAMMAR, TVM_FFI, PYDANTIC, OPENCV, UVLOOP)
    found = walk(index, start=[VLLM, MISTRAL, EXTRA_TYPES, XGRAMMAR, TVM_FFI], env=LINUX)
    assert sorted(g.line() for g in found.unmet) == [
        "unmet: pydantic-extra-types[pycountry] 2.11.1 requires pycountry>=23, not installed",
        "unmet: xgrammar 0.2.9 requires apache-tvm-ffi>=0.1.11, apache-tvm-ffi 0.1.9 is installed (bundle)"]
    assert found.reached["mistral-common"] == {"image", "opencv"}  # vllm asked [image], which asks [opencv]


@pytest.mark.pure
def test_an_extra_chain_reaches_a_missing_package_pip_check_would_not():
    index = _index(VLLM, MISTRAL, EXTRA_TYPES, XGRAMMAR, Dist("apache-tvm-ffi", "0.1.11"), PYDANTIC, UVLOOP,
                   Dist("pycountry", "26.2.16"))
    found = walk(index, start=[VLLM], env=LINUX, overrides=["apache-tvm-ffi"])
    assert [g.line() for g in found.unmet] == [
        "unmet: mistral_common[opencv] 1.13.1 requires opencv-python-headless>=4.0.0, not installed"]
    assert [g.line() for g in found.gaps if g.overridden] == [
        "overridden: vllm 0.25.0 requires apache-tvm-ffi==0.1.9; apache-tvm-ffi 0.1.11 is installed (host) (an EXTRA pin won)"]


@pytest.mark.pure
def test_requirements_whose_markers_do_not_hold_there_are_not_followed():
    windows = parse_platform("win_amd64", "3.12").markers
    index = _index(VLLM, MISTRAL, EXTRA_TYPES, TVM_FFI, PYDANTIC, OPENCV, Dist("pycountry", "26.2.16"))
    assert walk(index, start=[VLLM], env=windows).unmet == []  # neither uvloop nor x86_64's xgrammar, nor [bench]
    missing = walk(index, start=[VLLM], env=LINUX).unmet
    assert [g.requirement for g in missing] == ["xgrammar<1.0.0,>=0.2.1", "uvloop"]


@pytest.mark.pure
def test_roots_are_checked_as_extras_asks_them():
    found = walk(_index(Dist("six", "1.16.0")), roots=["six==1.17.0", "pycountry"], env=LINUX)
    assert [g.line() for g in found.unmet] == ["unmet: EXTRA requires six==1.17.0, six 1.16.0 is installed (host)",
                                              "unmet: EXTRA requires pycountry, not installed"]


# pip's failures, one line each

NUMPY_CONFLICT = """ERROR: Cannot install humming-kernels[cu13]==0.1.10, vllm and vllm==0.25.0 because these package versions have conflicting dependencies.

The conflict is caused by:
    vllm 0.25.0 depends on numpy
    humming-kernels[cu13] 0.1.10 depends on numpy
    numba 0.65.0 depends on numpy>=1.22
    numba 0.65.0 depends on numpy<2.5 and >=1.22
    The user requested (constraint) numpy==2.5.2

To fix this you could try to:
"""
NO_WHEEL = """ERROR: Could not find a version that satisfies the requirement llguidance<1.8.0,>=1.7.0; platform_machine == "x86_64" (from vllm) (from versions: 0.0.1, 1.6.0, 1.6.1)
ERROR: No matching distribution found for llguidance<1.8.0,>=1.7.0; platform_machine == "x86_64"
"""


@pytest.mark.pure
def test_a_conflict_with_the_hosts_pin_names_both_requirements_and_the_override():
    failed = parse_failure(NUMPY_CONFLICT)
    assert [(c.name, [(d.who, d.requirement) for d in c.demands]) for c in failed.conflicts] == [
        ("numpy", [("numba 0.65.0", "numpy<2.5,>=1.22"), ("FREEZE", "numpy==2.5.2")])]
    line = failed.conflicts[0].line(["vllm==0.25.0"])
    assert "\n" not in line and "numba 0.65.0 requires numpy<2.5,>=1.22" in line and "the host has numpy==2.5.2" in line
    assert "EXTRA='vllm==0.25.0 numpy==<version>'" in line


@pytest.mark.pure
def test_a_conflict_with_an_extra_pin_and_a_missing_wheel_are_read():
    pinned = parse_failure("The conflict is caused by:\n    The user requested apache-tvm-ffi==0.1.11\n"
                           "    vllm 0.25.0 depends on apache-tvm-ffi==0.1.9\n\n")
    assert [(d.who, d.requirement) for d in pinned.conflicts[0].demands] == [
        ("EXTRA", "apache-tvm-ffi==0.1.11"), ("vllm 0.25.0", "apache-tvm-ffi==0.1.9")]
    missing = parse_failure(NO_WHEEL).no_wheel
    assert (missing.requirement, missing.requirer, missing.versions[-1]) == ("llguidance<1.8.0,>=1.7.0", "vllm", "1.6.1")
    line = missing.line(parse_platform("manylinux_2_28_x86_64", "3.12"))
    assert "PLATFORM=manylinux_2_28_x86_64" in line and "llguidance==1.6.1" in line and "\n" not in line


@pytest.mark.pure
def test_a_stand_in_wheel_leaves_out_only_what_extra_won(tmp_path):
    vllm = Resolved("vllm", "0.25.0", ("apache-tvm-ffi==0.1.9", "xgrammar<1.0.0,>=0.2.1", "pandas; extra == 'bench'"),
                    ("bench",), "", None)
    stub = write_stub(vllm, {"apache-tvm-ffi"}, tmp_path)
    assert stub.name == "vllm-0.25.0+llmload.override-py3-none-any.whl"
    with zipfile.ZipFile(stub) as z:
        meta = z.read("vllm-0.25.0+llmload.override.dist-info/METADATA").decode()
    assert "Requires-Dist: xgrammar<1.0.0,>=0.2.1" in meta and "apache-tvm-ffi" not in meta
    assert "Provides-Extra: bench" in meta and "Version: 0.25.0+llmload.override" in meta


# bad input: one line, exit code 2, nothing written

@pytest.mark.pure
@pytest.mark.parametrize("setting,named", [
    ("PLATFORM=manylinux_2_28_x86", "PLATFORM="), ("PLATFORM=freebsd_14_amd64", "PLATFORM="), ("PART_MB=0", "PART_MB"),
    ("PART_MB=abc", "PART_MB"), ("PART_MB=0.5", "PART_MB"), ("PYTHON=3", "PYTHON="), ("EXTRA=vllm=0.25", "EXTRA"),
    ("FREEZE=/nonexistent/host-freeze.txt", "FREEZE="),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(cli, tmp_path, setting, named):
    out = tmp_path / "bundle"
    done = cli("bundle", setting, f"OUT={out}")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and named in done.stderr
    assert not out.exists()


@pytest.mark.pure
def test_an_out_holding_a_bundle_is_refused(cli, tmp_path):
    (tmp_path / MANIFEST).write_text("{}")
    done = cli("bundle", f"OUT={tmp_path}")
    assert done.returncode == 2 and "already holds a bundle" in done.stderr and done.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [MANIFEST]


# a real bundle, from PyPI, for this machine

def _this_platform() -> str:
    glibc = os.confstr("CS_GNU_LIBC_VERSION").split()[1].split(".")
    return f"manylinux_{glibc[0]}_{glibc[1]}_{os.uname().machine}"


def _bundle(folder: Path, extra: str) -> subprocess.CompletedProcess:
    """make bundle for this machine; FREEZE lists all of the suite's needs here but jinja2 and markupsafe, so little
    is downloaded (under 1 MiB)."""
    host = sorted(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions()
                  if d.metadata["Name"].lower() not in ("llmload", "jinja2", "markupsafe", "python-slugify", "text-unidecode"))
    (folder / "freeze.txt").write_text("\n".join(host) + "\n")
    done = run_cli("bundle", f"PLATFORM={_this_platform()}", f"PYTHON={sys.version_info[0]}.{sys.version_info[1]}",
                   f"EXTRA={extra}", f"FREEZE={folder / 'freeze.txt'}", "PART_MB=1", f"OUT={folder / 'out'}", timeout_s=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Bundle for" in done.stdout and "install.py" in done.stdout
    return done


@pytest.fixture(scope="module")
def small_bundle(tmp_path_factory) -> Path:
    """The suite and EXTRA=python-slugify==8.0.4 for this machine: 5 wheels."""
    folder = tmp_path_factory.mktemp("bundle")
    _bundle(folder, "python-slugify==8.0.4")
    return folder / "out"


@pytest.mark.integration
def test_a_small_bundle_installs_offline_and_passes_its_check(small_bundle, tmp_path):
    manifest = json.loads((small_bundle / MANIFEST).read_text())
    wheels = {w["name"].lower(): w for w in manifest["wheels"]}
    assert sorted(wheels) == ["jinja2", "llmload", "markupsafe", "python-slugify", "text-unidecode"]
    assert (wheels["python-slugify"]["from"], wheels["text-unidecode"]["from"], wheels["jinja2"]["from"]) == ("extra", "extra", "suite")
    assert "locust" in [x["name"].lower() for x in manifest["left_out"]]
    assert all(p["bytes"] <= MIB for p in manifest["parts"]) and sum(p["bytes"] for p in manifest["parts"]) == manifest["whole"]["bytes"]
    target = tmp_path / "site"
    done = subprocess.run([sys.executable, str(small_bundle / "install.py"), str(target)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "check: passed" in done.stdout and "imported llmload, plots, slugify" in done.stdout
    used = subprocess.run([sys.executable, "-c", "import slugify, llmload; print(slugify.slugify('Offline Bundle'), llmload.__file__)"],
                          env={**os.environ, "PYTHONPATH": str(target)}, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert used.stdout.split() == ["offline-bundle", str(target / "llmload" / "__init__.py")]


@pytest.mark.integration
def test_the_check_fails_on_a_dependency_removed_from_the_bundle(small_bundle, tmp_path):
    bundle = tmp_path / "bundle"
    shutil.copytree(small_bundle, bundle)
    manifest = json.loads((bundle / MANIFEST).read_text())
    with tarfile.open(bundle / "wheels.tar.part000") as tar:  # one part: PART_MB=1 holds it all
        tar.extractall(tmp_path / "x")
    kept = [w for w in manifest["wheels"] if w["name"] != "text-unidecode"]
    for part in bundle.glob("wheels.tar.part*"):
        part.unlink()
    whole = write_tar([tmp_path / "x" / "wheels" / w["file"] for w in kept], tmp_path / "wheels.tar")
    write_manifest(bundle, {**manifest, "wheels": kept, "parts": split_file(tmp_path / "wheels.tar", MIB, bundle),
                            "whole": whole})
    done = subprocess.run([sys.executable, str(bundle / "install.py"), str(tmp_path / "site")], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode != 0
    unmet = [line for line in done.stdout.splitlines() if line.startswith("unmet:")]
    assert unmet == ["unmet: python-slugify 8.0.4 requires text-unidecode>=1.3, not installed"]
    assert "check: FAILED" in done.stdout


@pytest.mark.integration
def test_a_damaged_part_is_named_before_anything_is_installed(small_bundle, tmp_path):
    bundle = tmp_path / "bundle"
    shutil.copytree(small_bundle, bundle)
    part = bundle / "wheels.tar.part000"
    data = bytearray(part.read_bytes())
    data[100] ^= 0xFF
    part.write_bytes(bytes(data))
    done = subprocess.run([sys.executable, str(bundle / "install.py"), str(tmp_path / "site")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and "part wheels.tar.part000 is missing or damaged" in done.stderr
    assert not (tmp_path / "site").exists()


@pytest.mark.integration
def test_an_extra_pin_wins_over_a_requirement_and_the_check_says_so(tmp_path):
    done = _bundle(tmp_path, "python-slugify==8.0.4 text-unidecode==1.2")  # python-slugify 8.0.4 requires >=1.3
    assert "EXTRA wins over python-slugify 8.0.4's text-unidecode>=1.3" in done.stdout
    manifest = json.loads((tmp_path / "out" / MANIFEST).read_text())
    assert manifest["overrides"] == {"text-unidecode": ["python-slugify 8.0.4 requires text-unidecode>=1.3"]}
    versions = {w["name"].lower(): w["version"] for w in manifest["wheels"]}
    assert (versions["python-slugify"], versions["text-unidecode"]) == ("8.0.4", "1.2")
    with tarfile.open(tmp_path / "out" / "wheels.tar.part000") as tar:  # the real wheel, not the stand-in
        assert "wheels/python_slugify-8.0.4-py2.py3-none-any.whl" in tar.getnames()
    installed = subprocess.run([sys.executable, str(tmp_path / "out" / "install.py"), str(tmp_path / "site")],
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert ("overridden: python-slugify 8.0.4 requires text-unidecode>=1.3; text-unidecode 1.2 is installed (bundle) "
            "(an EXTRA pin won)") in installed.stdout.splitlines()
