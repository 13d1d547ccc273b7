"""``make bundle``: an offline bundle of the suite (and EXTRA, e.g. vLLM) for a host without a registry.

    plan.py      PLATFORM's grammar, PYTHON, EXTRA, FREEZE and what the host already has: pure functions
    pip.py       pip's resolution and downloads for the host's platform, and its failures in one line
    parts.py     the wheels' tar in PART_MB parts, sha256 of each and of the whole, manifest.json
    command.py   the command: resolve, leave out, download, write, summarise
    install.py   on the host: verify, join, pip install --no-index --no-deps --target DIR, then check.py
    check.py     on the host: requirements, imports and a chat template, before any server starts
"""

from .command import run_bundle

__all__ = ["run_bundle"]
