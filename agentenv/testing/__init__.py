"""Test doubles and suites that ship with agentenv, imported only by those who test with them
(``import agentenv`` loads none of this):

- :class:`K3Server`: a K3-compatible endpoint on loopback (scripted turns, streamed
  ``reasoning_content`` then tool calls, faults, token accounting, a prefix cache), spoken
  to through the real ``openai`` client; ``agentenv serve-model`` runs one.
- ``agentenv.testing.conformance``: the suite any sandbox backend must pass.
"""

from agentenv.testing.k3server import Fault, K3Server, ScriptedToolCall, ScriptedTurn

__all__ = ["Fault", "K3Server", "ScriptedToolCall", "ScriptedTurn"]
