"""``import agentenv`` is safe inside someone else's program (a trainer): it configures no
logging, loads no test server, and its public names are pinned."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import agentenv
import agentenv.model
import agentenv.runner
import agentenv.sandbox
import agentenv.testing
from agentenv.tasks import Task

pytestmark = pytest.mark.no_docker

PUBLIC = {
    agentenv: [
        "ExecResult", "Limits", "Rollout", "Sandbox", "SandboxBackend", "SandboxError",
        "SandboxPool", "SandboxSpec", "SandboxUnavailable", "Snapshot", "SuspendedRollout",
        "Task", "Trajectory", "__version__", "create", "fork", "get_backend", "load_task",
        "recycling", "resume", "rollout",
        "rollout_group", "rollout_group_sync", "rollout_sync", "sandbox", "start", "stream",
    ],
    agentenv.model: [
        "PRESETS", "Capabilities", "Completion", "ContextOverflow", "Endpoint",
        "OpenAIChatModel", "Price", "StreamCut", "ToolCall", "Usage", "resolve_endpoint",
    ],
    agentenv.runner: [
        "Archive", "EpisodeSettings", "Final", "Policies", "Prepared", "finish", "prepare",
        "release", "run_task", "start_sandbox", "verify_final",
    ],
    sys.modules["agentenv.sandbox"]: [  # `agentenv.sandbox` is also a function's name
        "ArchiveTooLarge", "EngineUnavailable", "ExecResult", "ExecUserError", "FileTooLarge",
        "ImageFacts", "ImageStore", "ImageUnavailable", "Leftover", "Recycler",
        "Sandbox", "SandboxBackend", "SandboxClosed", "SandboxError", "SandboxPaused",
        "SandboxPool", "SandboxSpec", "SandboxUnavailable", "Snapshot", "attach",
        "backend_names", "create", "default_backend", "fork", "get_backend", "hand_back",
        "handed_back", "image_store", "recycling", "remove_snapshot", "reuse_or_create", "sandbox",
    ],
    agentenv.testing: ["Fault", "K3Server", "ScriptedToolCall", "ScriptedTurn"],
}  # fmt: skip


def test_public_names_are_pinned_and_importable() -> None:
    for module, names in PUBLIC.items():
        assert sorted(module.__all__) == sorted(names), module.__name__
        for name in names:
            assert getattr(module, name) is not None, f"{module.__name__}.{name}"


DEEP = {  # the documented deep paths, with the names they had before issue 29's moves
    "agentenv.tasks": [
        'Task', 'TaskError', 'load_task', 'load_tasks', 'task_digest', 'task_warnings'
    ],
    "agentenv.verify": [
        'AGENT_USER', 'AS_AGENT', 'CHECKERS', 'CHECKERS_DIR', 'CHECKER_CAPS', 'Check',
        'CheckResult', 'CommandCheck', 'CompositeCheck', 'FileCheck', 'HarborCheck', 'ImageCheck',
        'JsonCheck', 'MAX_CASE_OUTPUT', 'MAX_DEPTH', 'MAX_HARNESS_OUTPUT', 'MAX_REPORT',
        'ORIGINAL', 'OUT', 'OutputsCheck', 'PYTEST_CONFIGS', 'PytestCheck', 'ROOT',
        'SWEBENCH_PYTHON', 'Score', 'SweBenchCheck', 'TESTS', 'Workspace', 'is_subset',
        'leaf_checks', 'load_json', 'originals', 'prepare', 'verify'
    ],
    "agentenv.runner.eval": [
        'EpisodeRunner', 'EpisodeSettings', 'JobStopped', 'Progress', 'check_endpoints',
        'collect_leftovers', 'job_config', 'job_id', 'load_config', 'regrade', 'run_eval',
        'settled', 'write_summary'
    ],
    "agentenv.runner.rollout": [
        'GroupTimings', 'Policy', 'Rollout', 'SuspendedRollout', 'resume', 'rollout',
        'rollout_group', 'rollout_group_sync', 'rollout_sync', 'set_advantages', 'start', 'stream'
    ],
    "agentenv.runner.ray_executor": [
        'CANCEL_WAIT_S', 'runner'
    ],
    "agentenv.agent.policies": [
        'ScriptedModel', 'command', 'null', 'oracle', 'replay'
    ],
    "agentenv.sandbox.backend": [
        'BUILTIN', 'ENTRY_POINT_GROUP', 'Leftover', 'SandboxBackend', 'attach', 'backend_names',
        'check_options', 'create', 'default_backend', 'fork', 'fork_by_creating', 'get_backend',
        'remove_snapshot', 'sandbox'
    ],
    "agentenv.sandbox.labels": [
        'CREATED', 'EXPIRES', 'JOB', 'KEPT', 'KIND', 'OWNER', 'RESERVED_PREFIX', 'RUN',
        'SNAPSHOT_REPOSITORY', 'job_scope', 'labels_for', 'owner', 'owner_alive', 'run_id',
        'stale_reason'
    ],
    "agentenv.sandbox.executors": [
        'Executors', 'ExplainFailure', 'FILE_GUARD_S', 'StartExecutor', 'check_exec_args',
        'untars'
    ],
    "agentenv.sandbox.channel": [
        'ByteStream', 'EXECUTOR_ARGV', 'ExecutorChannel', 'ExecutorGone', 'HANDSHAKE_S',
        'MAX_PAYLOAD', 'PYTHON_ARGV', 'StreamClosed', 'handshake_s'
    ],
    "agentenv.testing.conformance": [
        'LEASE', 'MakeSandbox',
        'test_a_file_leased_by_a_frozen_process_is_left_out_not_a_failure',
        'test_a_tar_padded_past_its_end_goes_in',
        'test_background_writer_does_not_hold_the_command', 'test_binary_and_invalid_utf8_output',
        'test_callback_errors_reach_the_caller_unchanged',
        'test_closed_sandbox_refuses_every_call', 'test_command_not_found_is_127',
        'test_concurrent_commands_run_at_once', 'test_cwd', 'test_default_cwd_is_not_root',
        'test_env_is_per_call', 'test_exec_as_a_user_by_name', 'test_exit_codes',
        'test_file_errors_carry_the_right_errno', 'test_file_modes',
        'test_file_round_trip_5mb_binary', 'test_frozen_reads_never_reach_the_host',
        'test_large_output_is_capped_keeping_head_and_tail', 'test_launch_failures_are_typed',
        'test_no_stdin_means_eof', 'test_output_callback_receives_chunks',
        'test_output_under_the_cap_is_exact', 'test_permission_denied_without_capabilities',
        'test_read_errors', 'test_read_with_a_size_limit',
        'test_reading_a_planted_fifo_does_not_hang', 'test_sandbox_usable_after_timeout',
        'test_shell_string_runs_in_bash_when_present', 'test_stderr_capped_independently',
        'test_stdin', 'test_stdin_the_command_does_not_read',
        'test_stdout_and_stderr_are_separate', 'test_tar_files_on_the_host_go_in_and_come_out',
        'test_timeout_holds_after_the_command_closes_its_output',
        'test_timeout_kills_offspring_that_left_the_tree', 'test_timeout_kills_the_process_tree',
        'test_unicode_paths', 'test_upload_folder_and_download_tar',
        'test_upload_tar_extracts_into_a_folder_and_download_works_paused',
        'test_write_creates_parents_and_replaces', 'test_write_over_a_read_only_file_is_refused',
        'test_write_over_an_existing_file_keeps_it'
    ],
    "agentenv.inspect_provider": [
        'AgentenvSandboxEnvironment', 'DEFAULT_CAPS', 'default_spec', 'spec_for'
    ],
    "agentenv.harbor": [
        'HARBOR_FIELDS', 'LOGS', 'MAX_REWARD_FILE', 'SCHEMA_VERSIONS', 'TESTS', 'is_harbor',
        'task_fields', 'verify_in_sandbox'
    ],
    "agentenv.swebench": [
        'is_instances_file', 'materialize', 'read_instances', 'swebench_image', 'task_files'
    ],
}  # fmt: skip


@pytest.mark.parametrize("path", sorted(DEEP))
def test_documented_deep_paths_keep_their_names(path: str) -> None:
    """A module that moved (verify.py, runner/eval.py, inspect_provider.py, …) is still
    importable at its documented path with every name it had, as thin re-exports."""
    import importlib

    module = importlib.import_module(path)
    missing = [name for name in DEEP[path] if not hasattr(module, name)]
    assert missing == [], f"{path} lost {missing}"


PROBE = r"""
import io, json, logging, sys
before = (list(logging.getLogger().handlers), logging.getLogger().level)
err = io.StringIO()
sys.stderr = err
import structlog
import agentenv
from agentenv.sandbox.pool import log as pool_log
pool_log.warning("pool.discard", id="x")  # silent: the application configured nothing
sys.stderr = sys.__stderr__
print(json.dumps({
    "root_untouched": (list(logging.getLogger().handlers), logging.getLogger().level) == before,
    "structlog_configured": structlog.is_configured(),
    "stderr": err.getvalue(),
    "loaded": sorted(
        m
        for m in ("http.server", "agentenv.testing", "pytest", "openai", "docker")
        if m in sys.modules
    ),
}))
"""


def test_import_configures_nothing_and_loads_no_test_server_nor_sdk() -> None:
    # openai takes about a second to import: it loads when a client is made
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    got = json.loads(done.stdout)
    assert got == {
        "root_untouched": True,
        "structlog_configured": False,
        "stderr": "",
        "loaded": [],
    }, got


def test_the_application_sees_agentenv_logs_through_its_own_logging() -> None:
    code = (
        "import logging, sys\n"
        "logging.basicConfig(stream=sys.stdout, format='%(name)s %(message)s')\n"
        "from agentenv.sandbox.pool import log; log.warning('pool.discard', id='x')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "agentenv.sandbox.pool pool.discard", done


def test_backends_are_found_by_name_and_a_wrong_name_says_which_exist() -> None:
    from agentenv.sandbox import SandboxBackend, SandboxError, backend_names, get_backend

    assert {"docker", "podman"} <= set(backend_names())
    for name in ("docker", "podman"):
        found = get_backend(name)
        assert isinstance(found, SandboxBackend) and found.name == name
    with pytest.raises(SandboxError, match="known: docker, podman"):
        get_backend("kubernetes")


def test_nothing_above_the_backends_names_docker_or_openai() -> None:
    """The seams hold: only a backend's own folder (and Docker's compose environments,
    sandbox/compose/) imports the docker SDK or its errors,
    only the model client, its probe (and the test double) import openai, and nothing names
    DockerSandbox outside its backend (the CLI's engine set-up, `doctor`, imports the Docker
    backend's modules)."""
    import re
    from pathlib import Path

    root = Path(agentenv.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        text = path.read_text()
        for pattern, allowed in (
            # compose environments are Docker's only: their room speaks the SDK too
            (r"^\s*(import|from) docker\b", ("sandbox/docker/", "sandbox/compose/")),
            (r"docker\.errors\.", ("sandbox/docker/", "sandbox/compose/")),
            (r"\bDockerSandbox\b", ("sandbox/docker/", "sandbox/compose/")),
            # the test double builds the SDK's own client for its in-process transport
            (r"^\s*(import|from) openai\b", ("model/client.py", "model/probe.py", "testing/")),
        ):
            if re.search(pattern, text, re.MULTILINE) and not rel.startswith(allowed):
                offenders.append(f"{rel}: {pattern}")
    assert offenders == []


def test_a_task_can_be_built_in_memory() -> None:
    task = Task(id="in-memory", instruction="Write hello to out.txt.")
    assert task.folder is None and task.workspace is None
    again = Task.model_validate_json(task.model_dump_json())
    assert again.id == "in-memory" and again.instruction == task.instruction


FAKE_BACKEND = """
class Backend:
    name = "fake"

    async def create(self, spec): raise NotImplementedError
    async def attach(self, sandbox_id, spec): raise NotImplementedError
    async def fork(self, snapshot, n): raise NotImplementedError
    async def remove_snapshot(self, snapshot): pass
    def leftovers(self): return []
    def remove(self, leftover): return True


class NotABackend:
    name = "broken"


backend = Backend()
"""


def test_a_third_party_backend_is_found_through_its_entry_point(tmp_path: Path) -> None:
    # an installed distribution, as pip would leave it: a module and its dist-info
    (tmp_path / "fake_backend.py").write_text(FAKE_BACKEND)
    info = tmp_path / "fake_backend-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-backend\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[agentenv.sandbox_backends]\n"
        "fake = fake_backend:backend\n"
        "broken = fake_backend:NotABackend\n"
    )
    code = (
        "from agentenv.sandbox import SandboxError, SandboxSpec, backend_names, get_backend\n"
        "print(sorted(backend_names()))\n"
        "spec = SandboxSpec(backend='fake')\n"
        "print(type(get_backend('fake')).__name__, get_backend(spec.backend).name)\n"
        "try:\n    get_backend('broken')\nexcept SandboxError as e:\n    print(e)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    names, found, broken = done.stdout.splitlines()
    assert names == "['broken', 'docker', 'fake', 'podman']"
    assert found == "Backend fake"
    assert "lacks SandboxBackend's methods" in broken
