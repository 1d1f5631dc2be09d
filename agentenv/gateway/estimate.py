"""Token estimates for ``POST /v1/messages/count_tokens`` (Claude Code asks before it
compacts): the routed endpoint has no such route, so the gateway estimates as the local
K3 server counts, about four bytes a token."""

from __future__ import annotations

import json
from typing import Any

from agentenv.gateway.dialect import Call


def estimate_tokens(call: Call) -> int:
    """About how many input tokens ``call`` is: its messages and tool schemas as JSON."""
    size = len(json.dumps(call.messages).encode()) + len(json.dumps(call.tools).encode())
    return (size + 3) // 4


def count_tokens_answer(call: Call) -> dict[str, Any]:
    """Anthropic's ``count_tokens`` answer for ``call``."""
    return {"input_tokens": estimate_tokens(call)}


__all__ = ["count_tokens_answer", "estimate_tokens"]
