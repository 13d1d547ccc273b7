"""Locust users that send the load, the run session that keeps their records, the target they load."""
