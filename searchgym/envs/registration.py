"""Registers searchgym's environments with Gymnasium (filled in by the environment work)."""


def register_envs() -> None:
    return None
