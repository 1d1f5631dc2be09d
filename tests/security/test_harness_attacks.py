"""Red team for harness episodes: the model's commands run in the sandbox next to the harness,
as its user, so the agent can read the gateway's token, talk to the gateway's socket itself,
and poke at everything mounted or installed for the harness. Each test is an attack run from
inside a real Docker sandbox (or, for a whole episode, as a scripted model's tool calls through
a real installed harness), then the defence checked: budgets hold and every call is on the
trajectory, the gateway and the job survive, the mount cannot be changed, no real key is
visible, the verdict is the hidden verifier's."""

from __future__ import annotations

import json
import resource
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentenv.agent.loop import new_trajectory
from agentenv.agent.trajectory import Limits, Trajectory
from agentenv.gateway import Gateway
from agentenv.sandbox import SandboxSpec, create
from agentenv.sandbox.protocol import Sandbox
from agentenv.sandbox.spec import GATEWAY_MOUNT
from agentenv.testing import K3Server, ScriptedTurn
from tests.gateway.conftest import gateway_on, openai_client

pytestmark = [pytest.mark.anyio, pytest.mark.on_docker]

SOCK = f"{GATEWAY_MOUNT}/gateway.sock"
AGENT_USER = "1000:1000"  # the agent's commands: an unprivileged user, as in an episode

# The agent's client, run with python3 in the sandbox: raw HTTP/1.1 on the gateway's socket.
CLIENT = r"""
import json, os, socket, sys, threading
SOCK = "@SOCK@"
TOKEN = os.environ["TOKEN"]

def call(text, results, i):
    message = {"role": "user", "content": text}
    body = json.dumps({"model": "kimi-k3", "messages": [message]}).encode()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(SOCK)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: g\r\ncontent-type: application/json\r\n"
              + b"authorization: Bearer " + TOKEN.encode() + b"\r\ncontent-length: "
              + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    results[i] = data.split(b" ", 2)[1].decode() if data else "none"
""".replace("@SOCK@", SOCK)


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """The episode's gateway folder (short: a Unix socket's path is at most 107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="gwa-", dir="/tmp") as d:
        folder = Path(d) / "g"
        folder.mkdir()
        yield folder


@pytest.fixture
async def box(socket_dir: Path) -> AsyncIterator[Sandbox]:
    """An agent sandbox with the gateway's folder mounted, as a harness episode has it."""
    sandbox = await create(
        SandboxSpec(backend="docker", gateway_dir=socket_dir, network="none", user=AGENT_USER)
    )
    try:
        yield sandbox
    finally:
        await sandbox.close()


async def _py(box: Sandbox, script: str, token: str, timeout: float = 120) -> Any:
    return await box.exec(["python3", "-c", script], env={"TOKEN": token}, timeout=timeout)


async def _still_answers(gateway: Gateway) -> None:
    """A well-formed call after the attack is answered."""
    client = openai_client(gateway)
    try:
        r = await client.chat.completions.create(
            model="kimi-k3", messages=[{"role": "user", "content": "still there?"}]
        )
        assert r.choices[0].message.content
    finally:
        await client.close()


def _answer(text: str = "ok") -> Any:
    return lambda body: ScriptedTurn(content=text)


# -- the token: calls made with it directly are budgeted and recorded -------------------------


async def test_direct_calls_with_the_stolen_token_stay_within_the_turn_budget(
    socket_dir: Path, box: Sandbox
) -> None:
    """The agent reads the token and fires many calls at once: each is recorded, and no
    more than max_turns are answered (not one per connection that raced past the check)."""
    traj = new_trajectory("attack", task_id="a")
    with K3Server(_answer(), ttft_s=0.5) as server:
        async with gateway_on(
            server, socket_dir, sandbox=box, limits=Limits(max_turns=2), trajectory=traj
        ) as gateway:
            attack = CLIENT + (
                "results = {}\n"
                "ts = [threading.Thread(target=call, args=('steal %d' % i, results, i))"
                " for i in range(12)]\n"
                "[t.start() for t in ts]; [t.join() for t in ts]\n"
                "print(json.dumps(sorted(results.values())))\n"
            )
            done = await _py(box, attack, gateway.token)
            statuses = json.loads(done.stdout)
        answered = len(server.requests)
    assert statuses.count("200") <= 2, statuses
    assert answered <= 2, f"the endpoint was called {answered} times with max_turns=2"
    assert len(traj.turns) == statuses.count("200")  # every answered call is on the trajectory
    assert traj.stop_reason == "max_turns"


async def test_a_wrong_token_is_refused_and_not_recorded(socket_dir: Path, box: Sandbox) -> None:
    traj = new_trajectory("attack", task_id="a")
    with K3Server(_answer()) as server:
        async with gateway_on(server, socket_dir, sandbox=box, trajectory=traj):
            attack = CLIENT + "r = {}\ncall('x', r, 0)\nprint(r[0])\n"
            done = await _py(box, attack, "guessed-token")
        assert done.stdout.strip() == "401" and not server.requests and not traj.turns


# -- floods: the gateway and the job survive -----------------------------------------------

FLOODS = r"""
import os, socket, time
SOCK = "@SOCK@"
TOKEN = os.environ["TOKEN"]
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(SOCK); return s
def status(s):
    s.settimeout(60)
    try:
        data = s.recv(4096)
    except OSError as e:
        return "error " + type(e).__name__
    return data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/") else "closed"
out = {}
# a body far over the limit, sent as fast as the socket takes it
s = conn()
s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: g\r\nauthorization: Bearer "
          + TOKEN.encode() + b"\r\ncontent-length: 200000000\r\n\r\n")
try:
    chunk = b"x" * (1 << 20)
    for _ in range(200):
        s.sendall(chunk)
except OSError:
    pass
out["huge_body"] = status(s)
# headers that never end
s = conn()
s.sendall(b"GET /v1/models HTTP/1.1\r\n")
try:
    for i in range(100000):
        s.sendall(b"x-pad-%d: %s\r\n" % (i, b"y" * 100))
except OSError:
    pass
out["endless_headers"] = status(s)
# not HTTP at all, and binary
for name, junk in (("garbage", b"\x00\xff\xfe" * 1000 + b"\r\n\r\n"),
                   ("bad_request_line", b"GET\r\n\r\n"),
                   ("bad_chunked", b"POST /v1/chat/completions HTTP/1.1\r\nhost: g\r\n"
                                   b"transfer-encoding: chunked\r\n\r\nzz\r\n")):
    s = conn(); s.sendall(junk); out[name] = status(s)
# a body that is not UTF-8, and JSON nested past any recursion limit
for name, body in (("non_utf8", b'{"model": "\xff\xfe\xfd", "messages": []}'),
                   ("deep_json", b"[" * 200000 + b"]" * 200000),
                   ("not_object", b"[1, 2]"),
                   ("bad_messages", b'{"model": "m", "messages": [{"role": 7}], "tools": 3}')):
    s = conn()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: g\r\nauthorization: Bearer "
              + TOKEN.encode() + b"\r\ncontent-length: " + str(len(body)).encode()
              + b"\r\n\r\n" + body)
    out[name] = status(s)
# slowloris: many connections, each a byte of a request at a time, then dropped
slow = [conn() for _ in range(200)]
for i in range(20):
    for s in slow:
        s.send(b"POST /v1/chat/completions HTTP/1.1\r\n"[i:i + 1])
for s in slow:
    s.close()
print(repr(out))
""".replace("@SOCK@", SOCK)


async def test_floods_and_malformed_http_leave_the_gateway_answering(
    socket_dir: Path, box: Sandbox
) -> None:
    traj = new_trajectory("attack", task_id="a")
    with K3Server(_answer()) as server:
        async with gateway_on(server, socket_dir, sandbox=box, trajectory=traj) as gateway:
            done = await _py(box, FLOODS, gateway.token, timeout=300)
            assert done.exit_code == 0, done.stderr
            out = eval(done.stdout)  # our own script's repr of a dict of str
            await _still_answers(gateway)
        assert len(server.requests) == 1  # none of the junk reached the model
    assert out["huge_body"] in ("413", "closed"), out
    assert out["endless_headers"] in ("400", "431", "closed"), out
    for name in ("garbage", "bad_request_line", "non_utf8", "not_object", "bad_messages"):
        assert out[name] == "400", out
    assert out["deep_json"] in ("400", "500"), out
    assert len(traj.turns) == 1


HOLD = r"""
import os, socket, sys, time
SOCK = "@SOCK@"
held = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(SOCK)
    except OSError:
        break
    held.append(s)
time.sleep(3)  # the gateway accepts what it will meanwhile
print(len(held))
""".replace("@SOCK@", SOCK)


@pytest.fixture
def few_files() -> Iterator[int]:
    """This process (the job's, which runs every episode's gateway) at a low open-files
    limit, as a job is once its sandboxes and connections take its fds: the number left."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(list(Path("/proc/self/fd").iterdir()))
    resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + 400, hard))
    try:
        yield 400
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_thousands_of_connections_do_not_take_the_jobs_files(
    socket_dir: Path, box: Sandbox, few_files: int
) -> None:
    """The agent opens more connections to the socket than the job has files left: the
    gateway must cap what it accepts (not die on EMFILE, not starve the job's other work)."""
    traj = new_trajectory("attack", task_id="a")
    with K3Server(_answer()) as server:
        async with gateway_on(server, socket_dir, sandbox=box, trajectory=traj) as gateway:
            script = HOLD
            done = await box.exec(["python3", "-c", script, str(few_files * 5)], timeout=120)
            assert done.exit_code == 0, done.stderr
            # the job can still open files while the agent holds its connections
            opened = [open("/dev/null") for _ in range(few_files // 2)]  # noqa: SIM115
            for f in opened:
                f.close()
            await _still_answers(gateway)
    assert len(traj.turns) == 1


# -- the mount: read-only, nothing to replace -------------------------------------------------


async def test_the_gateway_folder_cannot_be_written_or_its_socket_replaced(
    socket_dir: Path, box: Sandbox
) -> None:
    with K3Server(_answer()) as server:
        async with gateway_on(server, socket_dir, sandbox=box) as gateway:
            before = gateway.socket_path.stat().st_ino
            tries = {
                "touch": f"touch {GATEWAY_MOUNT}/x",
                "unlink": f"rm -f {SOCK}",
                "rename": f"mv {SOCK} {GATEWAY_MOUNT}/old",
                "symlink": f"ln -s /etc/passwd {GATEWAY_MOUNT}/evil.sock",
                "chmod": f"chmod 777 {GATEWAY_MOUNT}",
                "bind": (
                    'python3 -c "import socket; s=socket.socket(socket.AF_UNIX);'
                    f" s.bind('{GATEWAY_MOUNT}/fake.sock')\""
                ),
                "up": f"ls {GATEWAY_MOUNT}/.. {GATEWAY_MOUNT}/../.. >/dev/null && "
                f"touch {GATEWAY_MOUNT}/../x",
                "remount": f"mount -o remount,rw {GATEWAY_MOUNT}",
            }
            for name, command in tries.items():
                done = await box.exec(["sh", "-c", command], timeout=60)
                assert done.exit_code != 0, (name, done.stdout, done.stderr)
            listing = await box.exec(["ls", "-A", GATEWAY_MOUNT], timeout=60)
            assert listing.stdout.split() == ["gateway.sock"]
            assert gateway.socket_path.stat().st_ino == before
            assert sorted(p.name for p in socket_dir.iterdir()) == ["gateway.sock"]
            await _still_answers(gateway)
        assert len(server.requests) == 1


async def test_nothing_of_the_host_but_the_socket_is_reachable(
    socket_dir: Path, box: Sandbox
) -> None:
    """No other episode's socket, no host path through the mount, no host network."""
    (socket_dir.parent / "other.sock").write_text("another episode's")  # a sibling on the host
    with K3Server(_answer()) as server:
        async with gateway_on(server, socket_dir, sandbox=box):
            host_port = server.base_url.rsplit(":", 1)[1].split("/")[0]
            probe = (
                f"ls {GATEWAY_MOUNT}/../other.sock 2>/dev/null && echo SIBLING; "
                f"cat {GATEWAY_MOUNT}/../../other.sock 2>/dev/null && echo SIBLING2; "
                "grep -h gateway /proc/self/mountinfo | wc -l; "
                'python3 -c "import socket; s=socket.socket(); s.settimeout(3); '
                f"s.connect(('172.17.0.1', {host_port}))\" 2>/dev/null && echo HOSTNET; true"
            )
            done = await box.exec(["sh", "-c", probe], timeout=60)
    assert "SIBLING" not in done.stdout and "HOSTNET" not in done.stdout, done.stdout
    assert done.stdout.split()[-1] == "1"  # one mount: the gateway's folder


# -- whole episodes: the attack is the scripted model's commands, run by mini-swe-agent --------

UPSTREAM_KEY = "sk-redteam-upstream-key-7f3a91"  # the model client's real key: never inside

RECON = r"""
import glob, json, os, urllib.request
KEY, K3 = %r[::-1], %r[::-1]  # reversed: this file holds no needle
cfg = json.load(open(os.path.expanduser("~/.agentenv-mini/agentenv.yaml")))
token, base = cfg["model"]["model_kwargs"]["api_key"], cfg["model"]["model_kwargs"]["api_base"]
report = {"uid": os.getuid()}
bad = []
for root, dirs, files in os.walk("/opt/agentenv-harness"):
    for n in dirs + files:
        p = os.path.join(root, n)
        st = os.lstat(p)
        if st.st_uid != 0 or (not os.path.islink(p) and os.access(p, os.W_OK)):
            bad.append(p)
try:
    open("/opt/agentenv-harness/planted", "w").write("x")
    bad.append("planted")
except OSError:
    pass
report["harness_writable"] = bad[:5]
found = []
for p in glob.glob("/proc/*/environ") + glob.glob("/proc/*/cmdline"):
    try:
        data = open(p, "rb").read()
    except OSError:
        continue
    found += [p for n in (KEY, K3) if n.encode() in data]
for root, dirs, files in os.walk("/"):
    if root in ("/proc", "/sys", "/dev", "/usr"):
        dirs[:] = []
        continue
    for n in files:
        p = os.path.join(root, n)
        try:
            if os.path.islink(p) or not os.path.isfile(p) or os.path.getsize(p) > 20 << 20:
                continue
            data = open(p, "rb").read()
        except OSError:
            continue
        found += [p for n in (KEY, K3) if n.encode() in data]
report["secrets"] = found[:5]
report["key_env"] = sorted(k for k in os.environ if "KEY" in k or "TOKEN" in k)
statuses = []
for i in range(2):
    body = json.dumps({"model": "x", "messages": [
        {"role": "user", "content": "direct " + json.dumps(report)}]}).encode()
    req = urllib.request.Request(base + "/chat/completions", body, {
        "authorization": "Bearer " + token, "content-type": "application/json"})
    statuses.append(urllib.request.urlopen(req, timeout=600).status)
print("DIRECT", statuses)
"""


def _answered(body: dict[str, Any]) -> int:
    return sum(m.get("role") == "assistant" for m in body["messages"])


def _bash(command: str) -> Any:
    from agentenv.testing import ScriptedToolCall

    return ScriptedToolCall(name="bash", arguments=json.dumps({"command": command}))


def attacker(commands: list[str]) -> Any:
    """The model: the harness's n-th call gets ``commands[n]``; a direct call is answered."""

    def script(body: dict[str, Any]) -> ScriptedTurn:
        first = body["messages"][0].get("content")
        if isinstance(first, str) and first.startswith("direct "):
            return ScriptedTurn(content="a direct answer")
        n = min(_answered(body), len(commands) - 1)
        return ScriptedTurn(reasoning="attack", tool_calls=[_bash(commands[n])])

    return script


FILE_CHECK = '[verifier]\nkind = "file"\npath = "answer.txt"\nequals = "ok"\n'


def _task(root: Path, toml: str = FILE_CHECK) -> Any:
    from agentenv.tasks import load_task

    folder = root / "answer"
    (folder / "workspace").mkdir(parents=True)
    (folder / "workspace" / "README").write_text("write ok into answer.txt\n")
    (folder / "instruction.md").write_text("Write ok into answer.txt.\n")
    (folder / "task.toml").write_text(toml)
    return load_task(folder)


async def _episode(
    tmp_path: Path, commands: list[str], limits: Limits, toml: str = FILE_CHECK
) -> tuple[Trajectory, K3Server]:
    import base64

    from agentenv.model import OpenAIChatModel
    from agentenv.rl.rollout import rollout

    with K3Server(attacker(commands)) as server:
        host = server.base_url.split("//", 1)[1].split("/", 1)[0]
        script = RECON % (UPSTREAM_KEY[::-1], host[::-1])
        encoded = base64.b64encode(script.encode()).decode()
        commands[:] = [c.replace("{RECON}", encoded) for c in commands]
        model = OpenAIChatModel(base_url=server.base_url, api_key=UPSTREAM_KEY)
        try:
            traj = await rollout(
                _task(tmp_path, toml),
                model,
                agent="mini-swe-agent",
                backend="docker",
                limits=limits,
            )
        finally:
            await model.aclose()
    return traj, server


async def test_an_agent_that_steals_the_token_is_budgeted_recorded_and_finds_no_secret(
    tmp_path: Path,
) -> None:
    """Turn 1 writes the answer, probes the harness install and the whole filesystem for the
    real key and the model's address, then calls the gateway twice itself with the token from
    the harness's config: those calls use up the budget (max_turns=3), are on the
    trajectory, and the harness's next call is refused; the episode is graded as it stands."""
    commands = ["echo ok > answer.txt && echo {RECON} | base64 -d > /tmp/r.py && python3 /tmp/r.py"]
    traj, server = await _episode(tmp_path, commands, Limits(max_turns=3))
    assert traj.error is None, traj.error
    assert len(server.requests) == len(traj.turns) == 3  # 1 by the harness + 2 direct
    assert traj.stop_reason == "max_turns"
    assert traj.harness is not None and traj.harness.stopped == "budget"
    direct = json.loads(server.requests[1]["messages"][0]["content"][len("direct ") :])
    assert direct["uid"] != 0
    assert direct["harness_writable"] == [], direct
    assert direct["secrets"] == [], direct
    assert traj.reward == 1.0  # the hidden verifier's verdict on the final state


async def test_killing_the_harness_supervisor_ends_the_episode_without_waiting_out_the_clock(
    tmp_path: Path,
) -> None:
    """The agent kills the relay that supervises its harness (same user): no status is ever
    written. The episode must see the supervisor gone (a crash), not wait for wall time."""
    kill = "echo ok > answer.txt; kill -9 $(cut -d' ' -f1 /tmp/.agentenv-harness-*/pid)"
    traj, _ = await _episode(tmp_path, [kill], Limits(max_turns=5, wall_time_s=120))
    assert traj.error is None, traj.error
    assert traj.harness is not None
    assert traj.harness.stopped == "crashed", traj.harness
    assert traj.stop_reason != "wall_time"
    assert traj.reward == 1.0  # graded as it stands


async def test_a_binary_flood_into_the_harness_log_stops_it_and_the_episode_is_graded(
    tmp_path: Path,
) -> None:
    """The agent writes megabytes of random bytes into the harness's own stdout (its pipe,
    through /proc) and makes its own log file a huge sparse file: the harness is stopped for
    flooding, the log on the trajectory is capped text, the verdict is the verifier's."""
    flood = (
        "echo ok > answer.txt; truncate -s 50G ~/.agentenv-mini/trajectory.json; "
        "head -c 8000000 /dev/urandom > /proc/$(cut -d' ' -f2 /tmp/.agentenv-harness-*/pid)/fd/1"
    )
    traj, _ = await _episode(tmp_path, [flood], Limits(max_turns=5, wall_time_s=300))
    assert traj.error is None, traj.error
    assert traj.harness is not None and traj.harness.stopped == "output_flood", traj.harness
    assert len(traj.harness.log.encode()) <= 4 * (64 << 10)
    json.loads(traj.model_dump_json())  # the trajectory still serialises
    assert traj.reward == 1.0


MINI_YAML = "/opt/agentenv-harness/mini-swe-agent/lib/minisweagent/config/mini.yaml"
FINAL_STATE_CHECK = (
    'verify_in = "final"\n[verifier]\nkind = "command"\n'
    'command = \'test "$(cat answer.txt)" = ok && test ! -e /opt/agentenv-harness/planted '
    f"&& ! grep -q pwned {MINI_YAML}'\n"
)


async def test_a_final_state_verdict_holds_no_change_of_the_agents_to_the_harness(
    tmp_path: Path,
) -> None:
    """A task verified in its final state: its checker is a snapshot of the agent's sandbox,
    which with a harness holds the harness's layer (the lead's decision: as Harbor's installed
    agents, documented in docs/gateway.md). What the agent must not do is change that layer
    to reach the verdict: planting a file in it or editing its files fails (root's, 0755)."""
    tamper = (
        "echo ok > answer.txt; touch /opt/agentenv-harness/planted; "
        f"echo pwned >> {MINI_YAML}; echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    )
    traj, _ = await _episode(tmp_path, [tamper], Limits(max_turns=3), FINAL_STATE_CHECK)
    assert traj.error is None, traj.error
    assert traj.score is not None
    assert traj.reward == 1.0, traj.score.checks


async def test_a_model_call_longer_than_the_harness_timeout_ends_the_episode_as_wall_time(
    tmp_path: Path,
) -> None:
    """The agent asks for an answer that takes the model longer than the episode's wall time
    (a huge output decodes for minutes): the sandbox is frozen the whole time, so the
    harness's timeout fires while frozen. Stopping it must wait for the thaw or cut the call,
    and the episode ends as wall_time and is graded; it must not fail with the sandbox
    paused."""
    from agentenv.model import OpenAIChatModel
    from agentenv.rl.rollout import rollout

    with K3Server(attacker(["echo ok > answer.txt"]), ttft_s=90) as server:
        model = OpenAIChatModel(base_url=server.base_url, api_key=UPSTREAM_KEY)
        try:
            traj = await rollout(
                _task(tmp_path),
                model,
                agent="mini-swe-agent",
                backend="docker",
                limits=Limits(max_turns=5, wall_time_s=10),
            )
        finally:
            await model.aclose()
    assert traj.error is None, traj.error
    assert traj.stop_reason == "wall_time"
    # stopped by its own clock, or by the gateway refusing its next call over the wall time
    assert traj.harness is not None and traj.harness.stopped in ("timeout", "budget")
    assert traj.score is not None and traj.reward == 0.0  # graded as it stands: nothing done


async def test_a_daemon_holding_the_harness_output_open_does_not_keep_the_episode_running(
    tmp_path: Path,
) -> None:
    """The agent leaves a process of its own session (outside the harness's group) holding
    the harness's stdout pipe open, then lets the harness submit and exit: the episode must end
    when the harness does (not wait for end-of-file on the pipe until the wall time), and the
    verdict is the verifier's on the state taken with the sandbox frozen."""
    hold = (
        "echo ok > answer.txt; "
        "child=$(cut -d' ' -f2 /tmp/.agentenv-harness-*/pid); "
        'setsid sh -c "exec 3>/proc/$child/fd/1; while :; do date > ticks; sleep 0.1; done" '
        "</dev/null >/dev/null 2>&1 & "
        "sleep 1; echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    )
    traj, _ = await _episode(tmp_path, [hold], Limits(max_turns=5, wall_time_s=120))
    assert traj.error is None, traj.error
    assert traj.harness is not None
    assert traj.harness.stopped is None and traj.harness.exit_code == 0, traj.harness
    assert traj.stop_reason == "harness_exited"
    assert traj.reward == 1.0


@pytest.mark.parametrize(
    "swap", ["mkfifo pid", "truncate -s 50G pid"], ids=["fifo", "sparse_50g_no_newline"]
)
async def test_a_pid_file_swapped_by_the_agent_does_not_hang_the_episode(
    tmp_path: Path, swap: str
) -> None:
    """The harness's state folder is the agent user's: the agent swaps its pid file for a
    FIFO (opening it blocks) or a 50 GB sparse file with no newline (a shell's read takes it
    a byte at a time), then submits. Whatever reads it must not block on it: the episode
    ends and is graded (a hang here is the job's, not the episode's)."""
    command = (
        f"echo ok > answer.txt; cd /tmp/.agentenv-harness-* && rm -f pid && {swap}; "
        "cd - >/dev/null; echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    )
    with anyio.fail_after(300):  # a guard against the hang under test, not a timing check
        traj, _ = await _episode(tmp_path, [command], Limits(max_turns=5, wall_time_s=120))
    assert traj.error is None, traj.error
    assert traj.harness is not None and traj.harness.stopped is None, traj.harness
    assert traj.reward == 1.0
