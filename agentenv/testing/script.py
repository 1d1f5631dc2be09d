"""The file of ``agentenv serve-model --script``: a JSON list of turns the local model answers
with, in order (the last one repeats)::

    [
      {"reasoning": "Look first.",
       "tool_calls": [{"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}]},
      {"content": "Done.", "tool_calls": [{"name": "submit", "arguments": "{}"}]}
    ]

Each turn is a :class:`~agentenv.testing.k3server.ScriptedTurn`; a tool call's
``arguments`` is a string holding JSON, as the chat-completions API sends it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from agentenv.problems import Problem, Problems, from_validation, read_json_list
from agentenv.testing.k3server import ScriptedTurn

SCRIPT_FILE = TypeAdapter(list[ScriptedTurn])
"""The whole file: a JSON list of turns."""


def read_script(path: Path) -> list[ScriptedTurn]:
    """The turns of a script file; raises :class:`~agentenv.problems.Problems` naming the
    file, the line of a JSON syntax error, and each wrong field (``turn 1.tool_calls.0``)."""
    raw = read_json_list(path, "turns")
    turns, problems = [], []
    for i, item in enumerate(raw):
        try:
            turns.append(ScriptedTurn.model_validate(item))
        except ValidationError as e:
            problems += from_validation(path, e, model=ScriptedTurn, prefix=f"turn {i}")
    if problems:
        raise Problems([_hinted(p) for p in problems])
    return turns


def _hinted(problem: Problem) -> Problem:
    """The usual mistake, ``arguments`` written as a JSON object, said in plain words."""
    if not (problem.field or "").endswith(".arguments"):
        return problem
    hint = 'the arguments are a string holding JSON, as "{\\"command\\": \\"ls\\"}"'
    return dataclasses.replace(problem, message=f"{problem.message}: {hint}")


__all__ = ["SCRIPT_FILE", "read_script"]
