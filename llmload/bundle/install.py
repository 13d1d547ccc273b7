"""Install an offline bundle on its host, then check it: ``python3 install.py [DIR] [--model FOLDER]``.

Runs on the host with the standard library and pip, from the bundle's folder (make bundle copies this file there):
checks every part's size and sha256, joins them, checks the whole's, checks each wheel's, installs them with
``pip install --no-index --no-deps --target DIR`` (DIR: ``site`` beside this file unless given), then runs
check.py against DIR and the host's own packages. Exit code 0 only when the check passed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _fail(line: str) -> int:
    print(f"install: {line}", file=sys.stderr)
    return 1


def main() -> int:
    parser = argparse.ArgumentParser(prog="install.py", description=__doc__.splitlines()[0])
    parser.add_argument("target", nargs="?", type=Path, default=HERE / "site", help="where the wheels go (default: site/ beside this file)")
    parser.add_argument("--model", type=Path, default=None, help="a model (or tokenizer) folder: the check renders its chat template offline")
    args = parser.parse_args()
    manifest = json.loads((HERE / "manifest.json").read_text())
    bad = [p for p in manifest["parts"] if not (HERE / p["file"]).is_file() or (HERE / p["file"]).stat().st_size != p["bytes"]
           or _sha256(HERE / p["file"]) != p["sha256"]]
    for part in bad:
        print(f"install: part {part['file']} is missing or damaged (expected {part['bytes']} bytes, sha256 {part['sha256']}): "
              "copy it again", file=sys.stderr)
    if bad:
        return 1
    target = args.target.resolve()
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".bundle-", dir=target.parent) as work:
        whole = Path(work) / manifest["whole"]["file"]
        with whole.open("wb") as out:
            for part in manifest["parts"]:
                with (HERE / part["file"]).open("rb") as f:
                    shutil.copyfileobj(f, out, 1 << 20)
        if _sha256(whole) != manifest["whole"]["sha256"]:
            return _fail(f"the joined parts' sha256 is not {manifest['whole']['sha256']}: make the bundle again")
        with tarfile.open(whole) as tar:
            names = {m.name for m in tar.getmembers()}
            expected = {f"wheels/{w['file']}" for w in manifest["wheels"]}
            if names != expected:
                return _fail(f"the joined tar holds {sorted(names ^ expected)[:3]} not as the manifest says: make the bundle again")
            tar.extractall(work, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        for wheel in manifest["wheels"]:
            if _sha256(Path(work) / "wheels" / wheel["file"]) != wheel["sha256"]:
                return _fail(f"{wheel['file']}: sha256 is not {wheel['sha256']}: make the bundle again")
        wheels = [str(Path(work) / "wheels" / w["file"]) for w in manifest["wheels"]]
        print(f"install: {len(manifest['parts'])} parts and {len(wheels)} wheels verified; installing into {target}", flush=True)
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--upgrade", "--quiet",
                               "--disable-pip-version-check", "--no-warn-script-location", "--target", str(target), *wheels])
        if done.returncode != 0:
            return _fail(f"pip install --no-index --no-deps --target {target} failed (exit {done.returncode}), see above")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    check = [sys.executable, str(HERE / "check.py"), str(target)] + (["--model", str(args.model)] if args.model else [])
    code = subprocess.run(check, env=env).returncode
    if code == 0:
        print(f"install: ready: run with PYTHONPATH={target} (its commands are in {target}/bin)"
              + (f", e.g. PYTHONPATH={target} HF_HUB_OFFLINE=1 {sys.executable} -m vllm.entrypoints.openai.api_server "
                 "--model MODEL_FOLDER" if "vllm" in manifest.get("imports", []) else ""))
    return code


if __name__ == "__main__":
    sys.exit(main())
