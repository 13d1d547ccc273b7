"""Scenarios (grids of load tests), the resumable runner, and the server-metrics sampler."""
