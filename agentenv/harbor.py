"""Harbor's task format, as it was importable here: loading is
:mod:`agentenv.formats.harbor`, verification the ``harbor`` check kind
(:mod:`agentenv.verify.kinds.harbor`)."""

from __future__ import annotations

from agentenv.formats.harbor import HARBOR_FIELDS, SCHEMA_VERSIONS, is_harbor, task_fields
from agentenv.verify.kinds.harbor import LOGS, MAX_REWARD_FILE, TESTS, verify_in_sandbox

__all__ = [
    "HARBOR_FIELDS",
    "LOGS",
    "MAX_REWARD_FILE",
    "SCHEMA_VERSIONS",
    "TESTS",
    "is_harbor",
    "task_fields",
    "verify_in_sandbox",
]
