"""Helpers that turn the config into target paths."""

RESULTS = config["results"]
RUN_CONFIG = f"{RESULTS}/config.yaml"


def all_targets():
    return [f"{RESULTS}/methods.yaml"]
