"""Moved to :mod:`agentenv.eval.jobs`; this documented path re-exports its names."""

from agentenv.eval.jobs import (
    EpisodeRunner,
    EpisodeSettings,
    JobStopped,
    Progress,
    check_endpoints,
    collect_leftovers,
    job_config,
    job_id,
    load_config,
    regrade,
    run_eval,
    settled,
    write_summary,
)

__all__ = [
    "EpisodeRunner",
    "EpisodeSettings",
    "JobStopped",
    "Progress",
    "check_endpoints",
    "collect_leftovers",
    "job_config",
    "job_id",
    "load_config",
    "regrade",
    "run_eval",
    "settled",
    "write_summary",
]
