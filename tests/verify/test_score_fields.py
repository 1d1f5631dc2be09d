"""What a trajectory's ``score`` holds is written down where a user reads: each field of
:class:`Score` and :class:`CheckResult` has a description (in the JSON schema too), and
docs/rl.md names them where it shows ``Trajectory``."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.verify import CheckResult, Score

pytestmark = pytest.mark.no_docker

RL_DOC = Path(__file__).resolve().parents[2] / "docs" / "rl.md"


@pytest.mark.parametrize("model", [Score, CheckResult])
def test_every_field_is_described(model: type[Score] | type[CheckResult]) -> None:
    undescribed = [n for n, f in model.model_fields.items() if not (f.description or "").strip()]
    assert undescribed == []
    schema = model.model_json_schema()
    props = schema["properties"]
    assert all(props[name].get("description") for name in model.model_fields)


def test_the_rl_doc_lists_the_scores_fields() -> None:
    doc = RL_DOC.read_text()
    section = doc.split("## What a trajectory holds", 1)[1].split("\n## ", 1)[0]
    for model in (Score, CheckResult):
        for name in model.model_fields:
            assert f"`{name}`" in section, (model.__name__, name)
