"""The ``file`` check: a file exists, equals a text, matches a regex or has a sha256."""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from agentenv.verify.base import CheckBase, Run, result
from agentenv.verify.registry import leaf_scorer
from agentenv.verify.score import CheckResult


class FileCheck(CheckBase):
    """A file (relative to the workdir) exists and, if given, equals ``equals``, matches
    ``regex`` (search, multiline) or has ``sha256``."""

    kind: Literal["file"]
    path: str
    equals: str | None = None
    regex: str | None = None
    sha256: str | None = None
    strip: bool = True  # compare ``equals`` without surrounding whitespace


@leaf_scorer("file")
async def _file(run: Run, check: FileCheck) -> CheckResult:
    name = f"file {check.path}"
    data = await run.read_file(check.path)
    if data is None:
        return result(check, name, 0.0, "missing, unreadable, not a regular file or too big")
    if check.sha256 is not None and hashlib.sha256(data).hexdigest() != check.sha256.lower():
        return result(check, name, 0.0, "sha256 differs")
    text = data.decode(errors="replace")
    if check.equals is not None:
        a, b = (text.strip(), check.equals.strip()) if check.strip else (text, check.equals)
        if a != b:
            return result(check, name, 0.0, f"content differs: {text[:200]!r}")
    if check.regex is not None and re.search(check.regex, text, re.MULTILINE) is None:
        return result(check, name, 0.0, f"no match for /{check.regex}/")
    return result(check, name, 1.0, "ok")
