"""``agentenv serve-env``: an OpenEnv-compatible environment server for any agentenv task
set (docs/openenv.md). A trainer drives it with ``openenv-core``'s own clients
(``GenericEnvClient``, ``MCPToolClient``) over one WebSocket session per episode; each
episode runs in its own sandbox, frozen between steps, and its last step carries the
hidden verifier's reward. Needs ``pip install 'agentenv[serve-env]'`` (``websockets``).

Modules: :mod:`~agentenv.envserver.protocol` (the frames and actions),
:mod:`~agentenv.envserver.observation` (what is answered),
:mod:`~agentenv.envserver.session` (one connection's episode),
:mod:`~agentenv.envserver.http` (the HTTP routes), :mod:`~agentenv.envserver.server`.
"""

from __future__ import annotations

from agentenv.envserver.server import EnvServer

__all__ = ["EnvServer"]
