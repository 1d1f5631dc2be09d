"""A pytest check with ``isolation = "process"``: the hidden tests run as root in a pytest
process that never imports the agent's code, and reach it through the ``agent`` fixture,
which calls it in processes of the agent's user and hands back plain values. What the
agent's code returns, raises or does there (hang, print, read the hidden tests, return an
object equal to everything) can only fail its own calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.verify.test_verify import Boxes, agent, box, check, checker, verify, write

__all__ = ["agent", "box", "checker"]  # the module's fixtures, shared with test_verify.py
pytestmark = pytest.mark.anyio

HIDDEN = """import pytest


def test_values_come_back_as_plain_data(agent):
    assert agent.call("calc:add", 2, 3) == 5
    assert agent.call("calc:pair", 1, "a") == (1, "a")
    assert agent.call("calc:table") == {"a": [1, 2.5, None, True]}


def test_arguments_keep_their_types(agent):
    assert agent.call("calc:kinds", (1, 2), {3}, b"x", key=[4]) == ["tuple", "set", "bytes", "list"]


def test_what_it_raises_is_raised_here(agent):
    with pytest.raises(ValueError, match="not a number"):
        agent.call("calc:parse", "x")
    with pytest.raises(KeyError):
        agent.call("calc:lookup", "missing")


def test_no_value_is_no_pass(agent):
    with pytest.raises(Exception):  # does not take a call that gave nothing for a raise
        agent.call("calc:anything")


def test_a_hang_is_a_failed_call(agent):
    assert agent.call_with("calc:slow", timeout=1) == 1


def test_the_hidden_tests_are_out_of_reach(agent):
    assert agent.call("calc:peek") == "unreadable"
"""

CALC = """import os, time


class Anything(object):
    def __eq__(self, other):
        return True


class BadInput(ValueError):
    pass


def add(a, b):
    print("noise on stdout")
    return a + b


def pair(a, b):
    return (a, b)


def table():
    return {"a": [1, 2.5, None, True]}


def kinds(t, s, b, key):
    return [type(v).__name__ for v in (t, s, b, key)]


def parse(text):
    raise BadInput("not a number: %s" % text)


def lookup(name):
    return {}[name]


def anything():
    return Anything()


def slow():
    time.sleep(30)
    return 1


def peek():
    try:
        return os.listdir("/agentenv/tests")
    except OSError:
        return "unreadable"
"""


async def test_the_agent_fixture_gives_plain_values(box: Boxes, tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "test_calc.py").write_text(HIDDEN)
    await write(box, {"calc.py": CALC})
    score = await verify(box, check(kind="pytest", isolation="process"), tests=hidden)
    detail = score.checks[0].detail
    assert score.error is None and not score.suspicious, (detail, score.suspicious)
    # 4/6: the object equal to everything is no value, and the hang fails its call
    assert "4/6 passed" in detail, detail
    assert "test_no_value_is_no_pass" in detail and "test_a_hang_is_a_failed_call" in detail


async def test_honest_in_process_code_is_not_flagged(box: Boxes, tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "test_calc.py").write_text(
        "import pytest, calc\n\n"
        "def test_add():\n    assert calc.add(2, 3) == 5\n\n"
        "def test_sub():\n    assert calc.sub(5, 3) == 2\n\n"
        "@pytest.mark.skip(reason='later')\ndef test_later():\n    assert calc.sub(1, 1) == 5\n"
    )
    honest = (
        "class Money:\n    def __init__(self, c):\n        self.c = c\n"
        "    def __eq__(self, other):\n"
        "        return isinstance(other, Money) and other.c == self.c\n"
        "    def __hash__(self):\n        return hash(self.c)\n\n"
        "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n"
    )
    await write(box, {"calc.py": honest, "conftest.py": "import pytest\n"})
    score = await verify(box, check(kind="pytest", skipped="exclude"), tests=hidden)
    assert score.reward == 1.0 and not score.suspicious, (score.checks, score.suspicious)
    await write(box, {"calc.py": honest.replace("return a - b", "return 0")})
    failing = await verify(box, check(kind="pytest", partial=True, skipped="exclude"), tests=hidden)
    assert not failing.suspicious and failing.reward == pytest.approx(0.5), failing.checks
