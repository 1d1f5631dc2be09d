"""The top-level name ``verifiers.v1`` loads agentenv's taskset and harness by: ``vf-eval
agentenv_verifiers``, a prime-rl config's taskset id. v1 imports a plugin as
``verifiers.v1.tasksets.<id>`` or ``<id>`` and cannot import a dotted id, so
``agentenv.integrations.verifiers_v1`` (where everything is) needs this alias."""

from agentenv.integrations.verifiers_v1 import *  # noqa: F403
from agentenv.integrations.verifiers_v1 import __all__  # noqa: F401
