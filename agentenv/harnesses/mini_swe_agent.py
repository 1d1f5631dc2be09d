"""mini-swe-agent (PyPI ``mini-swe-agent``): a bash-only agent speaking OpenAI Chat
Completions through litellm. Installed as wheels for the image's python3 under
``/opt/agentenv-harness/mini-swe-agent/lib``; run as ``mini`` with its default agent class
(no prompts), the stock ``mini.yaml`` prompts, and a config file of ours on top: the gateway
as an OpenAI-compatible ``api_base``, the episode's token as the key, its own step and cost
limits off (the gateway enforces ours) and cost tracking errors ignored (the model is not in
litellm's price table)."""

from __future__ import annotations

import json

from agentenv.harnesses.base import Harness, Launch

VERSION = "2.4.6"


class MiniSweAgent(Harness):
    """mini-swe-agent's ``mini`` command, non-interactive."""

    def launch(
        self, instruction: str, *, base_url: str, token: str, model: str, workdir: str, home: str
    ) -> Launch:
        """``python3 -I`` running ``mini`` from the installed tree (``-I``: the agent's own
        commands, which inherit the environment, see no PYTHONPATH of ours)."""
        state = f"{home}/.agentenv-mini"
        config = {  # JSON is YAML: no YAML writer needed
            "agent": {"step_limit": 0, "cost_limit": 0},
            "environment": {"cwd": workdir, "timeout": 600},
            "model": {
                "model_name": f"openai/{model}",
                "model_class": "litellm",
                "cost_tracking": "ignore_errors",
                "model_kwargs": {"api_base": f"{base_url}/v1", "api_key": token},
            },
        }
        start = (
            "import sys; sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = 'mini'; "
            "from minisweagent.run.mini import app; app()"
        )
        argv = [
            "python3", "-I", "-c", start, f"{self.home}/lib",
            "--agent-class", "default",
            "-c", f"{self.home}/lib/minisweagent/config/mini.yaml", "-c", f"{state}/agentenv.yaml",
            "-o", f"{state}/trajectory.json", "-t", instruction,
        ]  # fmt: skip
        env = {
            "MSWEA_CONFIGURED": "true",  # no first-run setup prompt
            "MSWEA_SILENT_STARTUP": "1",
            "MSWEA_GLOBAL_CONFIG_DIR": state,
            "MSWEA_COST_TRACKING": "ignore_errors",
            "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "2",  # the gateway retries the endpoint
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch of the price table
            "LITELLM_TELEMETRY": "False",
            "HOME": home,
        }
        files = {f"{state}/agentenv.yaml": json.dumps(config, indent=1)}
        return Launch(argv=argv, env=env, files=files, logs=(f"{state}/trajectory.json",))


harness = MiniSweAgent(
    name="mini-swe-agent",
    version=VERSION,
    dialect="chat",
    pip=(f"mini-swe-agent=={VERSION}",),
    python=True,
)
"""The registered value (``agentenv --agent mini-swe-agent``)."""
