"""The web UI's form held to the rules a command line is: a POST /swarm whose settings break one starts nothing.

Locust's own /swarm casts each form field by its option's type and starts the users; a value out of range or a rule
between settings (rules.py) would only be found at test_start, after the form said "Swarming started". This check
runs first, on a copy of the options as the form would leave them, and answers as Locust answers a bad form:
``{"success": false, "message": <the one line>}``, so the page shows the error and nothing is sent.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any, Callable, Mapping

from llmload.errors import ConfigError
from llmload.loadtest.runconfig import RunConfig, launched_config
from llmload.settings import parse_duration_s

__all__ = ["SWARM_PATH", "form_options", "check_form", "install_form_check"]

logger = logging.getLogger("llmload")
SWARM_PATH = "/swarm"


def form_options(parsed: argparse.Namespace, form: Mapping[str, str]) -> argparse.Namespace:
    """The options Locust's /swarm would leave after ``form``, on a copy (Locust's casts: each field by the type of its
    option's current value; user_count, spawn_rate, run_time and host by their own). ConfigError for a value the cast
    refuses. (No import of Locust here: it patches the whole process with gevent.)"""
    options = dict(vars(parsed))
    for key, value in form.items():
        try:
            if key == "user_count":
                options["num_users"] = int(value)
            elif key == "spawn_rate":
                options["spawn_rate"] = float(value)
            elif key == "host":
                options["host"] = value.replace("<", "").replace(">", "")
            elif key == "run_time":
                if value:  # Locust's own parse keeps whole seconds
                    options["run_time"] = int(parse_duration_s(value))
            elif key in options and options[key] is not None and not isinstance(options[key], (bool, list)):
                options[key] = type(options[key])(value)
            elif key in options:
                options[key] = value
        except (ValueError, ConfigError):
            raise ConfigError(f"{key}={value!r} in the form is not a valid value for it") from None
    return argparse.Namespace(**options)


def check_form(parsed: argparse.Namespace, form: Mapping[str, str], processes: int = 1) -> None:
    """ConfigError (one line) when the form's settings break a range or a rule that a command line would break."""
    launched_config(RunConfig.of(form_options(parsed, form)), processes).checked()


def install_form_check(web_ui: Any, processes: Callable[[], int]) -> None:
    """Check every POST /swarm before Locust's own handler; ``processes``: those that will run the users."""
    from flask import jsonify, request

    @web_ui.app.before_request
    def _check_swarm() -> Any:
        if request.path != SWARM_PATH or request.method != "POST":
            return None
        try:
            check_form(web_ui.environment.parsed_options, request.form, processes())
        except ConfigError as e:
            logger.error("error: %s", e)
            return jsonify({"success": False, "message": str(e), "host": web_ui.environment.host})
        return None
