"""Claude Code (npm ``@anthropic-ai/claude-code``), speaking the Anthropic Messages API. The
npm package's postinstall (Node >= 22) only copies a native binary from its platform
package; we install the tree npm resolves for the image's CPU (scripts off) and run that
binary directly, so the image needs no Node. Started as ``claude -p`` (non-interactive) with
``ANTHROPIC_BASE_URL`` the gateway and the episode's token as ``ANTHROPIC_API_KEY``;
``--dangerously-skip-permissions`` with ``IS_SANDBOX=1`` (its own source's switch for a
deliberate sandbox, which also lets it run as root); nonessential traffic, telemetry, error
reports and the auto-updater off."""

from __future__ import annotations

from agentenv.harnesses.base import Harness, Launch

VERSION = "2.1.332"


class ClaudeCode(Harness):
    """``claude -p`` on the task's instruction."""

    def launch(
        self, instruction: str, *, base_url: str, token: str, model: str, workdir: str, home: str
    ) -> Launch:
        """The native binary, its config folder under the agent's home."""
        config_dir = f"{home}/.claude"
        start = (
            'b=$(ls "$0"/node_modules/@anthropic-ai/claude-code-linux-*/claude | head -n 1); '
            'exec "$b" "$@"'
        )
        argv = [
            "sh", "-c", start, self.home,
            "-p", "--dangerously-skip-permissions", "--output-format", "stream-json",
            "--verbose", "--model", model, instruction,
        ]  # fmt: skip
        env = {
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": token,
            "ANTHROPIC_MODEL": model,
            "ANTHROPIC_SMALL_FAST_MODEL": model,  # its side calls go to the same model
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
            "CLAUDE_CONFIG_DIR": config_dir,
            "IS_SANDBOX": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "NO_COLOR": "1",
        }
        return Launch(argv=argv, env=env, logs=(f"{config_dir}/projects",))


harness = ClaudeCode(
    name="claude-code",
    version=VERSION,
    dialect="anthropic",
    npm=(f"@anthropic-ai/claude-code@{VERSION}",),
)
"""The registered value (``agentenv --agent claude-code``)."""
