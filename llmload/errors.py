"""Exceptions the suite raises on bad input or an unusable server.

    LoadTestError            every error the CLI turns into one line and a non-zero exit
    ├── ConfigError          an option, setting or file the user gave is wrong
    ├── PromptSetError       a prompt set cannot be read
    └── ServerError          the target does not answer, or does not serve what was asked
"""

from __future__ import annotations

__all__ = ["LoadTestError", "ConfigError", "PromptSetError", "ServerError"]


class LoadTestError(Exception):
    """Base class: its message is one line that names the bad value and the fix."""


class ConfigError(LoadTestError):
    """An option, setting or file given by the user is wrong."""


class PromptSetError(LoadTestError):
    """A prompt set is missing or malformed."""


class ServerError(LoadTestError):
    """The target server does not answer or does not serve what was asked."""
