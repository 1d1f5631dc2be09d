"""The outputs check's ``requires`` (a case earns nothing unless the cases it names pass
too: rejecting bad input only counts next to parsing good input) and ``match`` (the message
of a ``raises`` case), through the real episode and verifier. Cases that misuse them are
refused when the task is loaded (tests/test_validate.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.verify.test_outputs_check import detail, make_task, score, write

pytestmark = pytest.mark.anyio

CASES = [
    {"name": "one", "args": ["1"], "expect": 1},
    {"name": "two", "args": ["2"], "expect": 2},
    {"name": "empty", "args": [""], "raises": "ValueError", "requires": ["one", "two"]},
    {"name": "minus", "args": ["-1"], "raises": "ValueError", "match": "^negative: -1$"},
    {"name": "not a str", "args": [3], "raises": "TypeError", "requires": ["one"]},
]
PARSE = """
def parse(text):
    if not isinstance(text, str):
        raise TypeError("a str, please")
    if text.startswith("-"):
        raise ValueError("negative: " + text)
    return int(text)
"""
# rejects every input with an exception that is every exception class the cases expect
REJECT_ALL = """
class Rejected(ValueError, TypeError):
    pass

def parse(text):
    raise Rejected("negative: -1")
"""
# parses "1" only; the wrong message for "-1"
PARSE_ONE = """
def parse(text):
    if text == "1":
        return 1
    raise ValueError(f"bad: {text}")
"""


async def test_requires_and_match(tmp_path: Path) -> None:
    verifier = {"kind": "outputs", "cases": "cases.json", "function": "p:parse", "partial": True}
    task = make_task(tmp_path, verifier, CASES)
    assert (await score(task, write("p.py", PARSE))).reward == 1.0
    # passes the three raises cases, but two of them require parsing that never happens
    rejects = await score(task, write("p.py", REJECT_ALL))
    assert rejects.reward == pytest.approx(1 / 5), detail(rejects)
    # only "one": "two" and "not a str" fail, "empty" needs "two", "minus" has the wrong message
    one = await score(task, write("p.py", PARSE_ONE))
    assert one.reward == pytest.approx(1 / 5), detail(one)
    assert "minus (raised ValueError but not /^negative: -1$/: bad: -1)" in detail(one)
