"""The ``json`` check: a JSON file equals a value, or contains it as a subset."""

from __future__ import annotations

import json
from typing import Any, Literal

from agentenv.verify.base import (
    CheckBase,
    Run,
    is_subset,
    load_json,
    result,
)
from agentenv.verify.registry import leaf_scorer
from agentenv.verify.score import CheckResult


class JsonCheck(CheckBase):
    """A JSON file equals ``equals``, or contains ``subset`` (dicts recursively, lists
    element-wise, other values equal)."""

    kind: Literal["json"]
    path: str
    equals: Any = None
    subset: Any = None


@leaf_scorer("json")
async def _json(run: Run, check: JsonCheck) -> CheckResult:
    name = f"json {check.path}"
    data = await run.read_file(check.path)
    if data is None:
        return result(check, name, 0.0, "missing, unreadable, not a regular file or too big")
    try:
        value = load_json(data)
    except ValueError as e:
        return result(check, name, 0.0, f"not valid JSON: {str(e)[:200]}")
    given = check.model_fields_set  # `equals = null` is a value to compare, not "not given"
    same = is_subset(check.equals, value) and is_subset(value, check.equals)
    if "equals" in given and not same:
        return result(check, name, 0.0, f"differs: {json.dumps(value)[:300]}")
    if "subset" in given and not is_subset(check.subset, value):
        return result(check, name, 0.0, f"does not contain the expected: {json.dumps(value)[:300]}")
    return result(check, name, 1.0, "ok")
