"""The README's examples, run in the order the README gives them, in a fresh folder that
sees the checkout's `environments/`, `examples/`, `scripts/` and `.venv` (as a clean clone
would): every command exits 0, and every line of output the README shows (numbers aside,
and rows it elides with "...") is in what the command printed. A command the README adds
that cannot run here (a key, a remote host) must be named in ``NOT_HERE`` with why."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SEEN = ("environments", "examples", "scripts", ".venv", "pyproject.toml", "verifiers")

# substring of a command or snippet → why it does not run here
NOT_HERE = {
    "bash scripts/test.sh": "the test suite itself",
    "kimi-k3": "needs a Moonshot API key",
    "gpu-box": "a self-hosted endpoint that is not on this machine",
    "runs/k3": "reads the job of the kimi-k3 example",
    "await agentenv.": "lines of an async def; docs/rl.md's whole script runs in tests/rl",
}


@dataclass
class Example:
    """One command (or Python snippet) of the README, with the output it shows."""

    line: int
    command: str
    python: bool = False
    shown: list[str] = field(default_factory=list)


def _blocks(text: str) -> Iterator[tuple[int, str, list[str]]]:
    """(line number, language, lines) of each fenced block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if m:
            start, lang, body = i + 1, m.group(1), []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            yield start, lang, body
        i += 1


def _joined(body: list[str], start: int) -> Iterator[tuple[int, str]]:
    """Lines with their backslash continuations joined."""
    acc, first = "", 0
    for n, line in enumerate(body):
        if not acc:
            first = start + n + 1
        if line.endswith("\\"):
            acc += line[:-1].rstrip() + " "
            continue
        yield first, acc + line
        acc = ""


def examples(text: str) -> list[Example]:
    """The README's examples in order: ``bash`` blocks are commands; in ``text`` blocks the
    ``$ `` lines are commands and the lines after each its output; a ``text`` block with
    no ``$`` right after a ``bash`` block is the output of that block's last runnable
    command; ``python`` blocks that are whole scripts are run."""
    out: list[Example] = []
    previous = ""
    for start, lang, body in _blocks(text):
        if lang == "bash":
            for n, line in _joined(body, start):
                command = re.sub(r"\s+#.*$", "", line).strip()
                if command and not command.startswith("#"):
                    out.append(Example(n, command))
        elif lang == "text" and any(line.startswith("$ ") for line in body):
            for n, line in _joined(body, start):
                if line.startswith("$ "):
                    out.append(Example(n, line[2:].strip()))
                elif out and out[-1].line >= start:
                    out[-1].shown.append(line)
        elif lang == "text" and previous == "bash":
            runnable = [e for e in out if not why_not_here(e)]
            runnable[-1].shown.extend(body)
        elif lang == "python":
            code = "\n".join(body)
            if "anyio.run(" in code or "await " in code:
                out.append(Example(start, code, python=True))
        previous = lang
    return out


def why_not_here(example: Example) -> str | None:
    """Why ``example`` cannot run on this machine, or ``None``."""
    for needle, why in NOT_HERE.items():
        if needle in example.command:
            return why
    return None


def _normal(text: str) -> str:
    """Numbers and runs of spaces and table rules made alike, for comparing output."""
    text = re.sub(r"[━─═]+", "", text)
    text = re.sub(r"\d[\d.,]*", "#", text)
    return re.sub(r"\s+", " ", text).strip()


def _comparable(shown: str) -> bool:
    """Whether a shown line is output to find (not an elision or a bare table rule)."""
    if "..." in shown or "…" in shown:
        return False
    return bool(re.sub(r"[\s━─═┏┓┗┛┡┩┳┻╇┼├┤└┘┌┐│┃]", "", shown))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], deadline_s: float = 30) -> None:
    """Until ``proc`` listens on ``port``; it must stay up meanwhile."""
    until = time.monotonic() + deadline_s
    while time.monotonic() < until:
        assert proc.poll() is None, f"the background command exited {proc.returncode}"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"nothing listened on port {port} within {deadline_s:g} s")


def test_the_readme_lists_runnable_examples() -> None:
    found = examples(README.read_text())
    runnable = [e for e in found if not why_not_here(e)]
    # the three uses and the main job are among what runs, not only what is skipped
    text = "\n".join(e.command for e in runnable)
    for needle in ("eval environments/ --model oracle", "agentenv refactor", "rl_loop.py"):
        assert needle in text, needle
    main = next(e for e in runnable if "eval environments/ --model oracle" in e.command)
    assert any("total" in line for line in main.shown), "the main job's output is not attached"


@pytest.mark.slow
def test_the_readme_examples_run_in_order_and_print_what_it_shows(tmp_path: Path) -> None:
    home = tmp_path / "clone"
    home.mkdir()
    for name in SEEN:
        (home / name).symlink_to(ROOT / name)
    ports: dict[str, str] = {}  # a port the README names → a free one here
    env = {
        **os.environ,
        "PATH": f"{home / '.venv' / 'bin'}:{os.environ['PATH']}",
        "COLUMNS": "200",
        "NO_COLOR": "1",
    }
    background: list[subprocess.Popen[bytes]] = []
    ran: list[str] = []
    skipped: list[tuple[int, str, str]] = []
    differ: list[str] = []
    try:
        for example in examples(README.read_text()):
            why = why_not_here(example)
            if why:
                skipped.append((example.line, example.command.splitlines()[0], why))
                continue
            for named in re.findall(r"(?:--port |127\.0\.0\.1:)(\d+)", example.command):
                ports.setdefault(named, str(_free_port()))

            def here(text: str) -> str:
                text = text.replace("/tmp/demo", str(tmp_path / "demo"))
                for named, free in ports.items():
                    text = re.sub(rf"(--port |127\.0\.0\.1:){named}\b", rf"\g<1>{free}", text)
                return text

            command = here(example.command)
            where = f"README.md:{example.line}: {command.splitlines()[0]}"
            if example.python:
                argv = [str(home / ".venv/bin/python"), "-c", command]
            elif command.endswith("&"):
                proc = subprocess.Popen(
                    ["bash", "-c", command[:-1]],
                    cwd=home,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
                background.append(proc)
                _wait_for_port(int(re.findall(r"--port (\d+)", command)[0]), proc)
                ran.append(where)
                continue
            else:
                argv = ["bash", "-c", command]
            done = subprocess.run(argv, cwd=home, env=env, capture_output=True, timeout=900)
            printed = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
            assert done.returncode == 0, f"{where}\nexit {done.returncode}\n{printed[-3000:]}"
            got = _normal(printed)
            missing = [s for s in example.shown if _comparable(s) and _normal(here(s)) not in got]
            if missing:  # every difference at once, with what was printed instead
                differ.append(f"{where}\nshown but not printed:\n" + "\n".join(missing))
                differ.append(f"printed:\n{printed}")
            ran.append(where)
    finally:
        for proc in background:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
    print("ran:", *ran, sep="\n  ")
    print("not here:", *(f"README.md:{n}: {c} ({w})" for n, c, w in skipped), sep="\n  ")
    assert not differ, "\n".join(differ)
    assert len(ran) >= 10, ran


def test_commands_are_split_as_a_shell_would() -> None:
    # the parser keeps a continued command whole, quotes included
    text = "```text\n$ agentenv refactor --repos r \\\n    --model 'command:a \"b\" c'\nok\n```\n"
    (only,) = examples(text)
    assert shlex.split(only.command) == [
        "agentenv",
        "refactor",
        "--repos",
        "r",
        "--model",
        'command:a "b" c',
    ]
    assert only.shown == ["ok"]
