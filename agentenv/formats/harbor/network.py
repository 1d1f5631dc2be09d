"""Harbor's network policies (``network_mode`` public / no-network / allowlist with
``allowed_hosts``) per phase → the agentenv task's ``network`` and ``allowed_hosts``, and
the verifier's own where it differs.

Harbor resolves a baseline from ``[environment]`` (``network_mode``, else the deprecated
``allow_internet``; agentenv's default stays no network where Harbor's is public), then the
agent's phase from ``[agent]`` and the verifier's from ``[verifier]``, each falling back to
the baseline. agentenv gives the agent's sandbox the agent's policy for its whole life
(setup steps included), and a verifier in a sandbox of its own (``final``, ``separate``)
its own policy; a verifier in the agent's sandbox (``shared``) has the agent's, and one
that states another is refused, as is an allowlist for a compose environment (its
services would need gateways of their own).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agentenv.formats.harbor.refused import NOT_YET, Bad
from agentenv.guest.egress import normalize

MODES = {"public": "bridge", "no-network": "none", "allowlist": "allowlist"}
"""Harbor's ``network_mode`` → agentenv's ``network``."""

Policy = tuple[str, tuple[str, ...]]  # agentenv network, allowed hosts


def network_fields(
    env: dict[str, Any],
    agent: dict[str, Any],
    verifier: dict[str, Any],
    *,
    mode: str,
    compose: bool,
    downloads: bool,
    bad: Bad,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The task's ``network`` (+ ``allowed_hosts``) and the harbor check's own (empty when
    the verifier's policy is the agent's), for a verifier run in ``mode``. ``downloads``:
    the task's test.sh fetches something (:func:`fetches`), so a verifier the task says
    nothing about gets Harbor's default, the internet."""
    internet = env.get("allow_internet", False)
    if not isinstance(internet, bool):
        bad("environment.allow_internet", f"{internet!r} is not true or false")
    stated = _policy(env, "environment", bad)
    baseline = stated or ("bridge" if internet is True else "none", ())
    chosen = _policy(agent, "agent", bad) or baseline
    explicit = _policy(verifier, "verifier", bad)
    own = verifier.get("environment")
    if explicit is None and mode == "separate" and isinstance(own, dict):
        # Harbor: a separate verifier with an environment of its own stands on that
        # environment's baseline, not the task's
        env, stated = own, _policy(own, "verifier.environment", bad)
        if isinstance(own.get("allow_internet"), bool):
            explicit = stated or ("bridge" if own["allow_internet"] else "none", ())
        elif "allow_internet" in own:
            bad(
                "verifier.environment.allow_internet",
                f"{own['allow_internet']!r} is not true or false",
            )
        else:
            explicit = stated
    if explicit is None and stated is None and "allow_internet" not in env and downloads:
        # Harbor's default is public: a test.sh that installs its runner (curl ... uv) needs
        # it, and would write reward 0 without it. Where it fetches nothing, agentenv's
        # default (no network) stands: the agent's programs run in that sandbox too
        if mode != "shared":
            explicit = ("bridge", ())
        elif chosen[0] == "none":
            why = "'shared': tests/test.sh downloads (Harbor's verifier has the internet by "
            why += "default) but would run in the agent's sandbox, which has no network unless "
            why += "[environment] network_mode = 'public' says so (or leave the mode to agentenv)"
            bad("verifier.environment_mode", why)
    # Harbor's verifier falls back to the baseline; in the agent's sandbox (shared) agentenv
    # keeps the agent's rather than refuse every task whose [agent] widens the baseline
    checked = explicit or (chosen if mode == "shared" else baseline)
    if compose and "allowlist" in (chosen[0], checked[0]):
        bad("environment.network_mode", f"a network allowlist for a compose environment {NOT_YET}")
    task = {"network": chosen[0], "allowed_hosts": list(chosen[1])}
    if checked == chosen:
        return task, {}
    if mode == "shared":
        names = {v: k for k, v in MODES.items()}
        why = f"{names[checked[0]]!r} differs from the agent's {names[chosen[0]]!r}: a network "
        bad(
            "verifier.network_mode", why + f"of the verifier's own in the agent's sandbox {NOT_YET}"
        )
        return task, {}
    return task, {"network": checked[0], "allowed_hosts": list(checked[1])}


def _policy(table: dict[str, Any], where: str, bad: Bad) -> Policy | None:
    """The policy one table states, or ``None`` when it states none (the phase inherits)."""
    mode, hosts = table.get("network_mode"), table.get("allowed_hosts")
    if mode is None:
        if hosts is not None:
            bad(f"{where}.allowed_hosts", "is only valid with network_mode = 'allowlist'")
        return None
    if mode not in MODES:
        bad(f"{where}.network_mode", f"{mode!r} is not one of {', '.join(MODES)}")
        return None
    if mode != "allowlist":
        if hosts:
            bad(f"{where}.allowed_hosts", "is only valid with network_mode = 'allowlist'")
        return MODES[mode], ()
    if not isinstance(hosts, list | None):
        bad(f"{where}.allowed_hosts", "is not a list of hosts")
        return None
    entries = []
    for i, host in enumerate(hosts or []):
        try:
            entries.append(normalize(str(host)))
        except ValueError as e:
            bad(f"{where}.allowed_hosts[{i}]", str(e))
    return "allowlist", tuple(dict.fromkeys(entries))


# what a shell script that downloads says: a URL of a public-looking host (a dot in its
# name; not localhost, a loopback address or a compose service's bare name), or a package
# manager fetching (a test.sh's `curl http://localhost:8000` reaches the task's own service)
_FETCH = re.compile(
    r"https?://(?!localhost\b|127\.|0\.0\.0\.0|\[::1\])[\w-]+(\.[\w-]+)+|"
    r"\b(pip3?|uv\s+pip|npm|pnpm|yarn)\s+(install|add|ci)\b|\buvx\s|\buv\s+(run|sync|tool)\b|"
    r"\bapt(-get)?\s+(update|install)\b|\bgit\s+clone\b|\bnpx\s|\bgo\s+(get|install)\b"
)


def fetches(script: Path) -> bool:
    """Whether the task's own ``script`` (a test.sh, read on the host, never the agent's)
    visibly downloads: a URL of a public host, a package manager installing (pip, uv,
    npm, apt-get, go), ``git clone``. Comment lines do not count."""
    try:
        text = script.read_text(errors="replace")
    except OSError:
        return False
    lines = (line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return any(_FETCH.search(line) for line in lines)
