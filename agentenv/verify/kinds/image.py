"""The ``image`` check: a valid PNG, not blank, at least a given size."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentenv.verify.base import CHECKERS, CheckBase, Run, in_workdir, load_json, result
from agentenv.verify.registry import leaf_scorer
from agentenv.verify.score import CheckResult


class ImageCheck(CheckBase):
    """A valid PNG, not blank (more than one colour), at least ``min_width`` ×
    ``min_height``; checked inside the sandbox by ``verifiers/png_check.py``."""

    kind: Literal["image"]
    path: str
    min_width: int = Field(16, ge=1)
    min_height: int = Field(16, ge=1)
    timeout_s: float = Field(60, gt=0)


@leaf_scorer("image")
async def _image(run: Run, check: ImageCheck) -> CheckResult:
    name = f"image {check.path}"
    argv = [
        "python3",
        "-I",
        f"{CHECKERS}/png_check.py",
        in_workdir(run.ws.workdir, check.path),
        str(check.min_width),
        str(check.min_height),
    ]
    r = await run.sandbox.exec(argv, timeout=check.timeout_s, max_output=65536)
    if r.timed_out:
        return result(check, name, 0.0, f"timed out after {check.timeout_s:g} s")
    try:
        verdict = load_json(r.stdout_bytes)
    except ValueError:
        detail = f"png_check crashed (exit {r.exit_code}): {(r.stdout + r.stderr)[-500:]}"
        return result(check, name, 0.0, detail, error=True)
    return result(check, name, 1.0 if verdict.get("ok") else 0.0, str(verdict.get("detail", "")))
