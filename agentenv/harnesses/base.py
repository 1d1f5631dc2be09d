"""What an agent harness is to agentenv: :class:`Harness`, a value saying how it is installed
(npm, PyPI and Debian packages), which model API it speaks (a gateway dialect) and how it is
started on a task (:class:`Launch`). One file per harness beside this one."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

HARNESS_ROOT = "/opt/agentenv-harness"
"""Where harnesses are installed in their image: root-owned, outside any workdir."""


class Launch(BaseModel):
    """How to start a harness in the sandbox on one task."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    argv: list[str]
    env: dict[str, str] = {}
    files: dict[str, str] = {}  # absolute path in the sandbox -> text, written before start
    logs: tuple[str, ...] = ()  # files or folders the harness logs to, collected after it ends


class Harness(BaseModel):
    """An agent harness, registered by name (entry point group ``agentenv.harnesses``).
    Subclasses give :meth:`launch`; everything else is data."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    version: str
    dialect: str  # the gateway dialect it speaks: "chat" | "responses" | "anthropic"
    npm: tuple[str, ...] = ()  # npm packages (name@version), installed with their dependencies
    pip: tuple[str, ...] = ()  # PyPI requirements (name==version), for the image's Python
    apt: tuple[str, ...] = ()  # Debian packages installed in the build
    python: bool = False  # needs the image's python3 (its pip packages run on it)

    @property
    def home(self) -> str:
        """The folder it is installed in."""
        return f"{HARNESS_ROOT}/{self.name}"

    def launch(
        self, instruction: str, *, base_url: str, token: str, model: str, workdir: str, home: str
    ) -> Launch:
        """The command, environment and files that run it on ``instruction`` against the
        gateway at ``base_url`` (an ``http://127.0.0.1:PORT`` inside the sandbox) with the
        per-episode ``token``; ``workdir`` is the task's folder, ``home`` the agent user's
        home (writable)."""
        raise NotImplementedError
