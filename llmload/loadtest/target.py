"""The server a run loads: HOST, or the built-in target started for GPU and MODEL."""

from __future__ import annotations

import contextlib
from typing import Iterator

from llmload.errors import ConfigError
from llmload.loadtest.runconfig import RunConfig
from llmload.system.processes import core_of_its_own

__all__ = ["target"]


@contextlib.contextmanager
def target(options: RunConfig) -> Iterator[str]:
    """Yield the server root; a built-in target (SPEEDUP times faster) lives as long as the block, on a core of its own."""
    if options.host:
        yield options.host.rstrip("/")
        return
    from llmload.sim import ProfileError, choose_profile, start_sim, stop_sim

    chosen = options.target_profile
    try:
        profile = choose_profile(chosen, options.gpu, options.model)
    except ProfileError as e:
        raise ConfigError(f"{e}; or point HOST= at a real server") from None
    plays = ["--target-profile", profile.path] if chosen else ["--gpu", options.gpu, "--model", profile.model]
    process, url = start_sim([*plays, "--speedup", f"{options.speedup:g}"])
    try:
        with core_of_its_own(process.pid):
            yield url
    finally:
        stop_sim(process)
