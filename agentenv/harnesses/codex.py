"""Codex CLI (npm ``@openai/codex``), speaking the OpenAI Responses API. The npm package is
a Node launcher for a static (musl) binary shipped in its platform package; we install the
tree npm resolves for the image's CPU and run that binary directly (what the launcher
execs), so the image needs no Node. Started as ``codex exec`` (non-interactive) with a
``config.toml`` of ours in ``CODEX_HOME``: a model provider whose ``base_url`` is the
gateway, its key read from an environment variable (no login), ``wire_api = "responses"``;
approvals and Codex's own sandbox bypassed (the container is the sandbox), update checks
and analytics off."""

from __future__ import annotations

from agentenv.harnesses.base import Harness, Launch

VERSION = "0.171.0"
TOKEN_ENV = "AGENTENV_GATEWAY_TOKEN"


def _toml(value: str) -> str:
    """A TOML basic string."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Codex(Harness):
    """``codex exec`` on the task's instruction."""

    def launch(
        self, instruction: str, *, base_url: str, token: str, model: str, workdir: str, home: str
    ) -> Launch:
        """The native binary with ``CODEX_HOME`` under the agent's home."""
        codex_home = f"{home}/.codex"
        config = "\n".join(
            [
                f"model = {_toml(model)}",
                'model_provider = "agentenv"',
                'approval_policy = "never"',
                'sandbox_mode = "danger-full-access"',
                "check_for_update_on_startup = false",
                "",
                "[model_providers.agentenv]",
                'name = "agentenv gateway"',
                f"base_url = {_toml(base_url + '/v1')}",
                f"env_key = {_toml(TOKEN_ENV)}",
                'wire_api = "responses"',
                "request_max_retries = 1",  # the gateway retries the endpoint itself
                "stream_max_retries = 1",
                "",
                "[analytics]",
                "enabled = false",
                "",
                "[feedback]",
                "enabled = false",
                "",
            ]
        )
        # the binary the launcher would exec: the one platform package npm installed
        start = (
            'v=$(ls -d "$0"/node_modules/@openai/codex-linux-*/vendor/*-unknown-linux-musl '
            '| head -n 1); PATH="$v/codex-path:$PATH" exec "$v/bin/codex" "$@"'
        )
        argv = [
            "sh", "-c", start, self.home,
            "exec", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check",
            "--color", "never", "-C", workdir, instruction,
        ]  # fmt: skip
        env = {
            "CODEX_HOME": codex_home,
            TOKEN_ENV: token,
            "CODEX_MANAGED_BY_NPM": "1",  # as its npm launcher says: updates are npm's
            "CODEX_MANAGED_PACKAGE_ROOT": f"{self.home}/node_modules/@openai/codex",
            "NO_COLOR": "1",
        }
        return Launch(
            argv=argv,
            env=env,
            files={f"{codex_home}/config.toml": config},
            logs=(f"{codex_home}/sessions", f"{codex_home}/log"),
        )


harness = Codex(
    name="codex", version=VERSION, dialect="responses", npm=(f"@openai/codex@{VERSION}",)
)
"""The registered value (``agentenv --agent codex``)."""
