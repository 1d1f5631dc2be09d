"""Deterministic verifiers: turn a sandbox's final state into a reward in [0, 1].

A task's ``[verifier]`` table picks a kind:

- ``command``: a command (run in the workdir) passes on exit 0;
- ``pytest``: the task's hidden tests; JUnit XML → the fraction passed (``partial``) or all
  or nothing;
- ``file``: a file exists / equals a text / matches a regex / has a sha256;
- ``json``: a JSON file equals a value, or contains it as a subset;
- ``image``: a valid PNG, not blank, at least a given size;
- ``outputs``: the agent's function (``module:function``) or program is run on the inputs of
  a cases file, as the agent's user; the sandbox only *produces* outputs (plain JSON or
  text), and the host compares them with the expected values, which never enter the
  sandbox (the cases file stays on the host) and never meet an object the agent built;
- ``composite``: checks combined by ``all``, ``any`` or ``weighted``;
- ``swebench``: a repo's own tests after a test patch (a SWE-bench instance, see
  :mod:`agentenv.swebench`): resolved when every FAIL_TO_PASS and PASS_TO_PASS test passes.

The verifier runs in a *checker sandbox*: a new container made from the task's prepared
state (never the agent's container), into which only the agent's final workspace is copied,
with the checker programs of ``verifiers/`` and the task's hidden ``tests/`` under
``/agentenv`` (root's, mode 0700). The checker is root there; the agent's code never is:
pytest runs as the agent's user, command checks call the agent's programs through
``$AS_AGENT``, and before each leaf check the workspace is laid down afresh and every process
of the agent's user is killed (verification fails loudly if one survives). Whatever the
sandbox produced is parsed on the host with caps on size and depth; a parse that fails is a
failed check, never an exception. A check that cannot run gives a :class:`Score` with
``error`` set; the episode runner decides whether that is the agent's doing.

Where it lives: :mod:`~agentenv.verify.score` (:class:`Score`, :class:`CheckResult`),
:mod:`~agentenv.verify.run` (:func:`verify`, :func:`lay_out`), one file per kind in
:mod:`~agentenv.verify.kinds` (its model and its scorer), and the dispatch by kind in
:mod:`~agentenv.verify.registry`. This module re-exports the names it always had.
"""

from __future__ import annotations

from agentenv.verify.base import (
    AGENT_USER,
    AS_AGENT,
    CHECKER_CAPS,
    CHECKERS,
    CHECKERS_DIR,
    MAX_DEPTH,
    MAX_REPORT,
    ORIGINAL,
    OUT,
    PYTEST_CONFIGS,
    ROOT,
    TESTS,
    Workspace,
    is_subset,
    load_json,
)
from agentenv.verify.kinds import (
    Check,
    CommandCheck,
    CompositeCheck,
    FileCheck,
    HarborCheck,
    ImageCheck,
    JsonCheck,
    OutputsCheck,
    PytestCheck,
    SweBenchCheck,
    leaf_checks,
)
from agentenv.verify.kinds.outputs import MAX_CASE_OUTPUT, MAX_HARNESS_OUTPUT
from agentenv.verify.kinds.swebench import SWEBENCH_PYTHON
from agentenv.verify.registry import NoScorer
from agentenv.verify.run import in_agent_grader, lay_out, originals, prepare, verify
from agentenv.verify.score import CheckResult, Score

__all__ = [
    "AGENT_USER",
    "AS_AGENT",
    "CHECKERS",
    "CHECKERS_DIR",
    "CHECKER_CAPS",
    "MAX_CASE_OUTPUT",
    "MAX_DEPTH",
    "MAX_HARNESS_OUTPUT",
    "MAX_REPORT",
    "ORIGINAL",
    "OUT",
    "PYTEST_CONFIGS",
    "ROOT",
    "SWEBENCH_PYTHON",
    "TESTS",
    "Check",
    "CheckResult",
    "CommandCheck",
    "CompositeCheck",
    "FileCheck",
    "HarborCheck",
    "ImageCheck",
    "JsonCheck",
    "NoScorer",
    "OutputsCheck",
    "PytestCheck",
    "Score",
    "SweBenchCheck",
    "Workspace",
    "in_agent_grader",
    "is_subset",
    "lay_out",
    "leaf_checks",
    "load_json",
    "originals",
    "prepare",
    "verify",
]
