"""An ``outputs`` check's cases file (``tests/cases.json``): its model, :class:`Case`, and
:func:`read_cases`, which both the task loader (so that a bad file is refused before
anything runs) and the verifier use. The file stays on the host; see
:class:`~agentenv.verify.OutputsCheck` for what the check does with it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from agentenv.problems import Problem, Problems, from_validation, read_json_list

if TYPE_CHECKING:
    from agentenv.verify import OutputsCheck


class Case(BaseModel):
    """One case of an outputs check's cases file: the inputs to give the agent's function
    (or program) and what must come out."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, description="Shown in the verdict; `requires` names it.")
    function: str | None = Field(
        None,
        pattern=r"^([A-Za-z_][\w.]*:)?[A-Za-z_][\w.]*$",
        description="Function mode: the function to call (`name`, or `module:name`) when it "
        "is not the check's.",
    )
    args: list[Any] = Field(
        [],
        description='Positional arguments (function mode; `{"$tuple": [...]}`, `$set`, '
        "`$iter`, `$bytes` stand for those values), or the program's argv after its "
        "command (program mode: strings; `{inputs}` is the folder of `files`).",
    )
    kwargs: dict[str, Any] = Field({}, description="Function mode: keyword arguments.")
    stdin: str | None = Field(None, description="Program mode: its standard input.")
    files: dict[str, str] = Field(
        {}, description="Input files (relative path → text), in a folder of their own."
    )
    expect: Any = Field(
        None,
        description="The expected return value (function mode) or stdout (program mode), "
        "compared as the check's `compare` says.",
    )
    raises: str | None = Field(
        None, description="Function mode, instead of `expect`: the exception class expected."
    )
    exit_code: int | None = Field(None, description="Program mode: the exit status (0).")
    stderr_contains: str | None = Field(None, description="Program mode: text stderr holds.")
    expect_args: list[Any] | None = Field(
        None, description="Function mode: the arguments as they must be after the call."
    )
    keep_tuples: bool = Field(
        False, description='Function mode: a returned tuple comes back as `{"$tuple": [...]}`.'
    )
    match: str | None = Field(
        None, description="With `raises`: a regex the exception's message must contain."
    )
    timeout_s: float | None = Field(None, gt=0, description="This case's time limit (seconds).")
    weight: float = Field(1.0, ge=0, description="Its share of a `partial` check's reward.")
    requires: list[str] = Field(
        [], description="Names of other cases without which this one earns nothing."
    )


CASES_FILE = TypeAdapter(list[Case])
"""The whole file: a non-empty JSON list of :class:`Case`."""

FUNCTION_ONLY = ("function", "kwargs", "raises", "match", "expect_args", "keep_tuples")
PROGRAM_ONLY = ("stdin", "exit_code", "stderr_contains")


def read_cases(path: Path, check: OutputsCheck, shown: Path | str | None = None) -> list[Case]:
    """The cases of ``check`` from ``path``; raises :class:`~agentenv.problems.Problems`
    (a ``ValueError``) naming every problem, with the file as ``shown`` (default: ``path``),
    its line for a JSON syntax error, the case and the field."""
    shown = path if shown is None else shown
    raw = read_json_list(path, "cases", shown)
    cases: list[Case] = []
    problems: list[Problem] = []
    for i, item in enumerate(raw):
        label = f"case {i}"
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            label += f" ({item['name']})"
        try:
            case = Case.model_validate(item)
        except ValidationError as e:
            problems += from_validation(shown, e, model=Case, prefix=label)
            continue
        problems += [Problem(shown, why, field=label) for why in _case_problems(case, check)]
        cases.append(case)
    names = {c.name for c in cases}
    for i, case in enumerate(cases):
        for missing in [n for n in case.requires if n not in names]:
            problems.append(Problem(shown, f"no case is named {missing!r}", f"case {i}.requires"))
    if not problems and sum(c.weight for c in cases) <= 0:
        problems.append(Problem(shown, "the cases' weights add up to 0"))
    if problems:
        raise Problems(problems)
    return cases


def _case_problems(case: Case, check: OutputsCheck) -> list[str]:
    """What is wrong with one well-formed case for this check (its mode, its compare)."""
    given = case.model_fields_set
    found = []
    mode = "function" if check.function else "program"
    wrong = [f for f in (PROGRAM_ONLY if check.function else FUNCTION_ONLY) if f in given]
    if wrong:
        found.append(f"{', '.join(wrong)} cannot be used in {mode} mode")
    if check.function is not None:
        if ("expect" in given) == (case.raises is not None):
            found.append("needs either expect or raises")
        if ":" not in check.function and case.function is None:
            found.append("needs a function (the check names only a module)")
        if case.match is not None and case.raises is None:
            found.append("match goes with raises")
        elif case.match is not None:
            try:
                re.compile(case.match)
            except re.error as e:
                found.append(f"match is not a regex: {e}")
    else:
        if not all(isinstance(a, str) for a in case.args):
            found.append("a program's args must be strings")
        if not given & {"expect", "exit_code", "stderr_contains"}:
            found.append("expects nothing (expect, exit_code, stderr_contains)")
    if "expect" in given and check.compare != "json" and not isinstance(case.expect, str):
        found.append(f"expect must be a string for compare = {check.compare!r}")
    for rel in case.files:
        parts = Path(rel).parts
        if not parts or Path(rel).is_absolute() or ".." in parts:
            found.append(f"files: {rel!r} is not a relative path")
    return found


__all__ = ["CASES_FILE", "Case", "read_cases"]
