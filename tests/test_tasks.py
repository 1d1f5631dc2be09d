"""Loading tasks: a good folder loads; a bad one names the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.errors import TaskError
from agentenv.tasks import load_task, load_tasks, task_digest

pytestmark = pytest.mark.no_docker


def make(root: Path, name: str = "t", toml: str = "", instruction: str = "Do it.\n") -> Path:
    folder = root / name
    (folder / "workspace").mkdir(parents=True)
    (folder / "task.toml").write_text(toml)
    if instruction is not None:
        (folder / "instruction.md").write_text(instruction)
    return folder


def test_a_task_folder_loads_with_defaults(tmp_path: Path) -> None:
    folder = make(
        tmp_path,
        "fix-it",
        'tags = ["python"]\n[limits]\nmax_turns = 7\n[verifier]\nkind = "file"\npath = "out.txt"\n',
    )
    (folder / "solution.sh").write_text("true\n")
    task = load_task(folder)
    assert task.id == "fix-it" and task.tags == ["python"] and task.limits.max_turns == 7
    assert task.workdir == "/workspace" and task.instruction == "Do it.\n"
    assert task.workspace == folder / "workspace" and task.solution == folder / "solution.sh"
    assert task.tests is None and task.verifier is not None
    before = task_digest(task)
    (folder / "workspace" / "new.txt").write_text("x")
    assert task_digest(load_task(folder)) != before


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("tags = [", "not valid TOML"),
        ("colour = 'blue'", "colour: Extra inputs are not permitted"),
        ("[limits]\nmax_turns = 'many'", "limits.max_turns"),
        ("[limits]\nmax_turn = 3", "limits.max_turn"),
        ("workdir = 'relative'", "workdir must be an absolute path"),
        ("[verifier]\nkind = 'magic'", "verifier"),
        ("[verifier]\nkind = 'file'", "verifier.file.path"),
        ("dockerfile = 'Dockerfile'", "dockerfile"),
        ("id = 'bad id!'", "id"),
        ("instruction = 'x'", "instruction: not a task.toml field"),
        ("tools = ['bash', 'rm']", "tools: Value error, unknown tool 'rm'"),
        ("tools = ['bash', 'bash']", "tool 'bash' is named twice"),
    ],
)
def test_bad_task_files_name_the_file_and_the_field(
    tmp_path: Path, toml: str, expected: str
) -> None:
    folder = make(tmp_path, toml=toml)
    with pytest.raises(TaskError) as caught:
        load_task(folder)
    message = str(caught.value)
    assert str(folder / "task.toml") in message and expected in message


def test_missing_files_and_duplicates(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match=r"task\.toml: not found"):
        load_task(tmp_path)
    folder = make(tmp_path, "a", instruction="  \n")
    with pytest.raises(TaskError, match=r"instruction\.md: empty"):
        load_task(folder)
    (folder / "instruction.md").unlink()
    with pytest.raises(TaskError, match=r"instruction\.md: not found"):
        load_task(folder)

    root = tmp_path / "set"
    make(root, "one", "id = 'same'")
    make(root, "two", "id = 'same'")
    with pytest.raises(TaskError, match="'same' is used twice"):
        load_tasks([root])
    with pytest.raises(TaskError, match="no task folders"):
        load_tasks([tmp_path / "set" / "one" / "workspace"])
    with pytest.raises(TaskError, match="no such task folder"):
        load_tasks([tmp_path / "nowhere"])


def test_bundled_tasks_load() -> None:
    tasks = load_tasks([Path(__file__).parent.parent / "environments"])
    assert len(tasks) >= 12
    for task in tasks:
        assert task.verifier is not None, task.id
        assert task.solution is not None, task.id
        assert task.description and task.tags, task.id


def test_a_task_chooses_its_tools_and_scripted_policies_say_what_they_lack(
    tmp_path: Path,
) -> None:
    from agentenv.runner.policy import Policies

    folder = make(tmp_path, toml="tools = ['read_file', 'submit']")
    task = load_task(folder)
    assert [tool.name for tool in task.agent_tools] == ["read_file", "submit"]
    assert [tool.name for tool in load_task(make(tmp_path / "all")).agent_tools] == [
        "bash", "read_file", "write_file", "edit_file", "submit",
    ]  # fmt: skip
    with pytest.raises(TaskError, match="a command policy needs bash too"):
        Policies("command:true").for_task(task)
