"""The JSON Schemas of the formats a user writes or reads are generated from the models that
parse them: the files shipped in the package and in docs/formats/ are what the models say
now, files that the parsers accept (the bundled tasks', docs/formats.md's examples) validate
against them, and a misspelt field fails both."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from agentenv.agent.trajectory import Trajectory
from agentenv.runner.results import EpisodeResult
from agentenv.schemas import DOCS, FORMATS, PACKAGED, REGENERATE, render, schema, stale
from agentenv.testing.k3server import DEMO_SCRIPT

pytestmark = pytest.mark.no_docker

ROOT = Path(__file__).resolve().parents[1]


def valid(name: str, value: Any) -> list[str]:
    """What is wrong with ``value`` by the format's schema (nothing: valid)."""
    checker = jsonschema.Draft202012Validator(schema(name))
    return [f"{list(e.absolute_path)}: {e.message}" for e in checker.iter_errors(value)]


@pytest.mark.parametrize("folder", [PACKAGED, DOCS], ids=["package", "docs"])
def test_the_schema_files_are_what_the_models_say(folder: Path) -> None:
    assert not stale(folder), f"{stale(folder)} in {folder} are out of date: run `{REGENERATE}`"
    assert sorted(p.name for p in folder.glob("*.json")) == sorted(
        f"{name}.schema.json" for name in FORMATS
    )


def test_a_model_change_makes_the_files_stale(tmp_path: Path) -> None:
    for name in FORMATS:
        (tmp_path / f"{name}.schema.json").write_text(render(name))
    assert stale(tmp_path) == []
    edited = json.loads(render("cases"))
    edited["$defs"]["Case"]["properties"]["expected"] = {}
    (tmp_path / "cases.schema.json").write_text(json.dumps(edited, indent=2) + "\n")
    assert stale(tmp_path) == ["cases.schema.json"]


def test_what_the_parsers_accept_the_schemas_accept() -> None:
    tomls = sorted((ROOT / "environments").glob("*/task.toml"))
    native = [p for p in tomls if not (p.parent / "environment").is_dir()]
    assert len(native) >= 10
    for path in native:
        assert valid("task", tomllib.loads(path.read_text())) == [], path
    cases = sorted((ROOT / "environments").glob("*/tests/cases.json"))
    assert cases
    for path in cases:
        assert valid("cases", json.loads(path.read_text())) == [], path
    script = [turn.model_dump() for turn in DEMO_SCRIPT]
    assert valid("script", script) == []
    result = EpisodeResult(task_id="t", sample=0, outcome="graded", reward=1.0, passed=True)
    assert valid("result", json.loads(result.model_dump_json())) == []
    trajectory = Trajectory(task_id="t", messages=[{"role": "user", "content": "hi"}])
    assert valid("trajectory", json.loads(trajectory.model_dump_json())) == []


def test_the_schemas_refuse_what_the_parsers_refuse() -> None:
    assert valid("cases", [{"args": [1], "expected": 2}])  # the field is `expect`
    assert valid("cases", [])
    assert valid("task", {"memroy": 1})
    assert valid("task", {"disk": "2g", "limits": {"max_turns": 3}}) == []
    calls = [{"tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]}]
    assert valid("script", calls)  # arguments are a string of JSON


def test_agentenv_schema_prints_the_shipped_files() -> None:
    run = [sys.executable, "-m", "agentenv", "schema"]
    listed = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and all(name in listed.stdout for name in FORMATS)
    printed = subprocess.run([*run, "cases"], capture_output=True, text=True, timeout=120)
    assert (
        printed.returncode == 0 and printed.stdout == (PACKAGED / "cases.schema.json").read_text()
    )
    unknown = subprocess.run([*run, "casez"], capture_output=True, text=True, timeout=120)
    assert unknown.returncode == 2 and "no format 'casez'" in unknown.stderr


def test_the_examples_of_docs_formats_md_are_valid() -> None:
    text = (ROOT / "docs" / "formats.md").read_text()
    sections = {s.split("\n", 1)[0]: s for s in text.split("\n## ")[1:]}
    blocks = {
        name: [b.split("\n", 1)[1] for b in sections[title].split("```json")[1:]]
        for name, title in (("cases", "cases.json"), ("script", "serve-model --script"))
    }
    assert len(blocks["cases"]) == 2 and len(blocks["script"]) == 1
    for name, found in blocks.items():
        for block in found:
            value = json.loads(block.split("```", 1)[0])
            assert valid(name, value) == [], (name, block)
