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
    bad: Bad,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The task's ``network`` (+ ``allowed_hosts``) and the harbor check's own (empty when
    the verifier's policy is the agent's), for a verifier run in ``mode``."""
    internet = env.get("allow_internet", False)
    if not isinstance(internet, bool):
        bad("environment.allow_internet", f"{internet!r} is not true or false")
    baseline = _policy(env, "environment", bad) or ("bridge" if internet is True else "none", ())
    chosen = _policy(agent, "agent", bad) or baseline
    explicit = _policy(verifier, "verifier", bad)
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
