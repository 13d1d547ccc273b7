"""Built-in OpenAI-compatible target that behaves like vLLM serving gpt-oss."""

from .launcher import IDENTITY_PATH, start_sim, stop_sim
from .profiles import Profile, ProfileError, choose_profile, load_profile, lookup_profile

__all__ = ["IDENTITY_PATH", "Profile", "ProfileError", "choose_profile", "load_profile", "lookup_profile", "start_sim", "stop_sim"]
