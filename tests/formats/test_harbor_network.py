"""Harbor's network policies per phase: ``[environment]`` baseline, ``[agent]`` and
``[verifier]`` (public / no-network / allowlist with ``allowed_hosts``) as agentenv loads
and runs them (the allowlist's enforcement itself: tests/sandbox/test_egress.py)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from agentenv.errors import TaskError
from agentenv.tasks import Task, load_task
from agentenv.verify.kinds.harbor import HarborCheck
from tests.formats.test_harbor import TOML, _run, harbor_task

ALLOW = 'network_mode = "allowlist"\nallowed_hosts = ["PyPI.org.", "*.example.com", "10.0.0.0/8"]\n'


def _toml(agent: str = "", verifier: str = "", environment: str = "") -> str:
    toml = TOML.format(verifier_timeout=60.0, extra=environment)
    toml = toml.replace("[agent]\n", "[agent]\n" + agent)
    return toml.replace("[verifier]\n", "[verifier]\n" + verifier)


def _load(tmp_path: Path, toml: str, name: str = "t") -> tuple[Task, HarborCheck]:
    task = load_task(harbor_task(tmp_path, name, test="true\n", toml=toml))
    assert isinstance(task.verifier, HarborCheck)
    return task, task.verifier


@pytest.mark.no_docker
def test_an_agent_allowlist_loads_and_the_verifier_gets_the_baseline(tmp_path: Path) -> None:
    agent = 'network_mode = "allowlist"\nallowed_hosts = ["PyPI.org.", "*.example.com"]\n'
    task, check = _load(tmp_path, _toml(agent=agent))
    assert (task.network, task.allowed_hosts) == ("allowlist", ["pypi.org", "*.example.com"])
    # Harbor: a verifier without a policy of its own has the [environment] baseline (here
    # agentenv's default, no network), not the agent's phase policy
    assert (check.network, check.allowed_hosts) == ("none", [])


@pytest.mark.no_docker
def test_each_phase_its_own(tmp_path: Path) -> None:
    toml = _toml(
        agent='network_mode = "no-network"\n',
        verifier='network_mode = "allowlist"\nallowed_hosts = ["192.0.2.7"]\n',
        environment='network_mode = "public"\n',
    )
    task, check = _load(tmp_path, toml)
    assert (task.network, check.network, check.allowed_hosts) == (
        "none",
        "allowlist",
        ["192.0.2.7"],
    )
    same, same_check = _load(tmp_path, _toml(environment='network_mode = "public"\n'), "u")
    assert (same.network, same_check.network) == ("bridge", None)  # the verifier's = agent's


@pytest.mark.no_docker
def test_shared_mode_refuses_a_verifier_policy_of_its_own(tmp_path: Path) -> None:
    toml = _toml(
        agent='network_mode = "allowlist"\nallowed_hosts = ["pypi.org"]\n',
        verifier='environment_mode = "shared"\nnetwork_mode = "no-network"\n',
    )
    with pytest.raises(TaskError, match=r"verifier\.network_mode: 'no-network' differs from the"):
        _load(tmp_path, toml)


SOLVE = """\
python3 - <<'EOF'
import os, socket, urllib.error, urllib.request
try:
    urllib.request.urlopen("http://not-on-the-list.test/", timeout=10)
    seen = "reached"
except urllib.error.HTTPError as e:
    seen = "refused %d" % e.code  # the gateway's answer: the proxy is in the way
except Exception as e:
    seen = "failed %r" % e
try:
    socket.create_connection(("192.0.2.7", 80), timeout=2)
    direct = "reached"
except OSError:
    direct = "no route"
ok = seen == "refused 403" and direct == "no route" and os.environ.get("https_proxy")
open("/app/out.txt", "w").write("hello\\n" if ok else "%s %s\\n" % (seen, direct))
EOF
"""
TEST = """\
# the verifier's own policy: no-network (only the loopback) or public (a route, and no
# proxy variable left over from the agent's sandbox it was made from)
routes=$(tail -n +2 /proc/net/route)
if [ "$WANT" = none ]; then [ -z "$routes" ]; else [ -n "$routes" ] && [ -z "$https_proxy" ]; fi
mine=$?
if [ "$(cat /app/out.txt)" = hello ] && [ $mine = 0 ]; then r=1; else r=0; fi
echo $r > /logs/verifier/reward.txt
"""


@pytest.mark.anyio
@pytest.mark.parametrize("verifier", ["no-network", "public"])
@pytest.mark.on_docker
async def test_a_harbor_task_with_an_allowlist_runs(tmp_path: Path, verifier: str) -> None:
    """The oracle, under the agent's allowlist, is refused by the gateway for a host not on
    it and has no route around it; the verifier runs in a sandbox of its own policy (made
    from the agent's final filesystem, without its proxy variables: a public verifier that
    kept them would download through a gateway that is gone)."""
    want = "none" if verifier == "no-network" else "bridge"
    own, env = f'network_mode = "{verifier}"\n', f'[environment.env]\nWANT = "{want}"\n'
    toml = _toml(agent=ALLOW, verifier=own, environment=env)
    folder = harbor_task(tmp_path, "allow", test=textwrap.dedent(TEST), solve=SOLVE, toml=toml)
    assert (await _run(folder, "oracle", backend="docker"))[0] == 1.0
    if verifier == "public":
        assert (await _run(folder, "null", backend="docker"))[0] == 0.0


@pytest.mark.no_docker
def test_a_compose_environment_refuses_an_allowlist(tmp_path: Path) -> None:
    folder = harbor_task(tmp_path, "c", test="true\n", toml=_toml(agent=ALLOW))
    (folder / "environment" / "docker-compose.yaml").write_text(
        "services:\n  main:\n    build: .\n  db:\n    image: agentenv/base:bookworm\n"
    )
    with pytest.raises(TaskError, match="a network allowlist for a compose environment"):
        load_task(folder)


@pytest.mark.no_docker
def test_a_public_phase_needs_the_internet_an_allowlist_does_not(tmp_path: Path) -> None:
    """A public verifier on a host without the internet is the ``no_internet`` outcome, as
    a public agent is; an allowlist is not (an allowed host that does not answer is the
    task's to meet)."""
    from agentenv.eval.online import needs_internet

    public_verifier, _ = _load(tmp_path, _toml(verifier='network_mode = "public"\n'), "v")
    allowlisted, _ = _load(tmp_path, _toml(agent=ALLOW), "a")
    assert needs_internet(public_verifier) and not needs_internet(allowlisted)


@pytest.mark.no_docker
def test_a_real_task_shape_loads(tmp_path: Path) -> None:
    """The phases as a published task set writes them (an agent allowed its vendor's
    hosts, a verifier without network, a public baseline for the environment)."""
    toml = _toml(
        agent='network_mode = "allowlist"\n'
        'allowed_hosts = ["vendor.test", "*.vendor.test", "*.vendor.sh", "dl.vendor.test"]\n',
        verifier='network_mode = "no-network"\n',
        environment='network_mode = "public"\n',
    )
    task, check = _load(tmp_path, toml)
    assert task.network == "allowlist" and len(task.allowed_hosts) == 4
    assert (check.mode, check.network) == ("final", "none")


UV = "curl -LsSf https://astral.sh/uv/0.9.7/install.sh | sh\nuvx pytest /tests/test_state.py\n"


@pytest.mark.no_docker
def test_a_test_sh_that_downloads_gets_harbors_default_the_internet(tmp_path: Path) -> None:
    from agentenv.eval.online import needs_internet, no_internet_reason

    # Harbor's template test.sh installs uv from astral.sh: with agentenv's default (no
    # network) its verifier wrote reward 0 for the oracle as for anyone
    folder = harbor_task(tmp_path, "uv", test=UV, toml=_toml())
    task = load_task(folder)
    assert isinstance(task.verifier, HarborCheck)
    assert (task.network, task.verifier.network) == ("none", "bridge")  # the agent's stays none
    assert needs_internet(task)  # so an offline host says no_internet, never a 0
    why = no_internet_reason(task, ["github.com"])
    assert "for its verifier" in why and "test.sh downloads" in why, why
    # one that fetches nothing keeps agentenv's default; a local service's URL is no download
    local = "curl -s http://localhost:8000/health\npython3 -m pytest /tests\n"
    quiet = load_task(harbor_task(tmp_path, "local", test=local, toml=_toml()))
    assert isinstance(quiet.verifier, HarborCheck)
    assert (quiet.network, quiet.verifier.network) == ("none", None)
    assert not needs_internet(quiet)
    # a task that states a policy gets it, whatever test.sh does
    said = _toml(environment='network_mode = "no-network"\n')
    stated = load_task(harbor_task(tmp_path, "said", test=UV, toml=said))
    assert isinstance(stated.verifier, HarborCheck) and stated.verifier.network is None
    assert not needs_internet(stated)


@pytest.mark.no_docker
def test_shared_mode_with_a_downloading_test_sh_and_no_network_is_refused(tmp_path: Path) -> None:
    toml = _toml(verifier='environment_mode = "shared"\n')
    said = re.escape("verifier.environment_mode: 'shared': tests/test.sh")
    with pytest.raises(TaskError, match=said):
        load_task(harbor_task(tmp_path, "s", test=UV, toml=toml))
    public = _toml(verifier='environment_mode = "shared"\n', environment="allow_internet = true\n")
    task = load_task(harbor_task(tmp_path, "p", test=UV, toml=public))
    assert task.network == "bridge"


@pytest.mark.no_docker
def test_a_separate_verifiers_own_environment_is_its_baseline(tmp_path: Path) -> None:
    # Harbor (trial/network_policy.py): in separate mode the verifier stands on its own
    # [verifier.environment]'s network, not the task's; [verifier] network_mode over it
    closed = _toml() + "[verifier.environment]\nallow_internet = false\n"
    check = load_task(harbor_task(tmp_path, "c", test=UV, toml=closed)).verifier
    assert isinstance(check, HarborCheck) and check.mode == "separate"
    assert check.network in (None, "none")  # as the agent's: no network, said by the task
    listed = _toml() + '[verifier.environment]\nnetwork_mode = "allowlist"\n'
    listed += 'allowed_hosts = ["pypi.org"]\n'
    check = load_task(harbor_task(tmp_path, "l", test=UV, toml=listed)).verifier
    assert isinstance(check, HarborCheck)
    assert (check.network, check.allowed_hosts) == ("allowlist", ["pypi.org"])
    over = _toml(verifier='network_mode = "public"\n') + "[verifier.environment]\ncpus = 1\n"
    check = load_task(harbor_task(tmp_path, "o", test="true\n", toml=over)).verifier
    assert isinstance(check, HarborCheck) and check.network == "bridge"
