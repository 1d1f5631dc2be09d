"""Running tasks: the episode lifecycle, eval jobs, and the policies by name."""

from agentenv.archive import Archive
from agentenv.runner.episode import (
    Final,
    Prepared,
    finish,
    prepare,
    release,
    run_task,
    start_sandbox,
    verify_final,
)
from agentenv.runner.policy import Policies
from agentenv.runner.retries import EpisodeSettings

__all__ = [
    "Archive",
    "EpisodeSettings",
    "Final",
    "Policies",
    "Prepared",
    "finish",
    "prepare",
    "release",
    "run_task",
    "start_sandbox",
    "verify_final",
]
