"""Every exception the suite raises on purpose, in one tree.

    LoadTestError              the CLI turns it into one line and exit code 2
    ├── ConfigError            an option, setting or file the user gave is wrong
    │   ├── ScenarioError      a scenario file is wrong (names the file and the key)
    │   ├── TemplateError      a prompt template or its pools cannot be used
    │   ├── TokenizerDataError the o200k_base data is missing or damaged
    │   ├── ProfileError       the built-in target has no such GPU x model
    │   └── ResultsError       a folder is not results, or its files are malformed
    ├── PromptSetError         a prompt set cannot be read
    └── ServerError            the target does not answer, or does not serve what was asked
        └── ServerFailed       a server the suite started (make tune) failed to start, died, or kept its port
    RequestFailed              one request failed; ``category`` is its record's error category
    ProtocolError              bytes from the server are not valid HTTP chunking or SSE
    ControlCallFailed          a control call (probe, /metrics, /tokenize, health) got no good answer
    Interrupted                SIGINT or SIGTERM stopped a command; the CLI prints one line, exits 128 + signal

RequestFailed and ProtocolError are part of measuring, not user errors: a failed request is
recorded, never raised to the user. ControlCallFailed is turned into a ServerError (or a counted
sampler failure) by the caller, which knows what the call was for.
"""

from __future__ import annotations

__all__ = [
    "LoadTestError", "ConfigError", "ScenarioError", "TemplateError", "TokenizerDataError", "ProfileError",
    "ResultsError", "PromptSetError", "ServerError", "ServerFailed", "RequestFailed", "ProtocolError", "ControlCallFailed",
    "Interrupted",
]


class LoadTestError(Exception):
    """Base class: its message is one line that names the bad value and the fix."""


class ConfigError(LoadTestError):
    """An option, setting or file given by the user is wrong."""


class ScenarioError(ConfigError):
    """A scenario file is wrong: one line naming the file, the key, the value and what is allowed."""


class TemplateError(ConfigError):
    """A template or its pools cannot be used; the message names the file and line."""


class TokenizerDataError(ConfigError):
    """The o200k_base data is missing or damaged."""


class ProfileError(ConfigError, ValueError):
    """An unknown or impossible (gpu, model) combination was asked of the built-in target."""


class ResultsError(ConfigError):
    """A folder is not results, or its files are malformed: one line naming the file."""


class PromptSetError(LoadTestError):
    """A prompt set is missing or malformed."""


class ServerError(LoadTestError):
    """The target server does not answer or does not serve what was asked."""


class ServerFailed(ServerError):
    """A server the suite started failed to start (``phase`` "start"), died while in use ("run"), or left its port
    taken after it stopped ("stop"); ``log_tail`` holds the last lines of its log, ``exit_code`` its exit code."""

    def __init__(self, message: str, phase: str, log_tail: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.phase = phase
        self.log_tail = log_tail
        self.exit_code = exit_code


class RequestFailed(Exception):
    """A request failed; ``category`` is the RequestRecord error category."""

    def __init__(self, category: str, detail: str = "") -> None:
        super().__init__(f"{category}: {detail}" if detail else category)
        self.category = category
        self.detail = detail


class ProtocolError(ValueError):
    """The byte stream is not valid chunked coding or SSE."""


class ControlCallFailed(Exception):
    """A control call failed; ``status`` is the HTTP status, None when the server did not answer."""

    def __init__(self, url: str, reason: str, status: int | None = None) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason
        self.status = status


class Interrupted(Exception):
    """SIGINT or SIGTERM stopped a command; ``exit_code`` is 128 + the signal's number (130, 143)."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum
