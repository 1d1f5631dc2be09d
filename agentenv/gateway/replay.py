"""What the gateway gave a harness, to give back to the model verbatim.

Harnesses keep their own history and send it back in their API's terms: a Chat Completions
client may drop ``reasoning_content``, the Responses and Messages APIs carry reasoning only as
items the harness may leave out, and a tool call's arguments come back re-serialized from
the object the harness parsed. K3 refuses a tool-call turn without its reasoning (400), and
its prefix cache serves only a byte-identical history; so every answer is remembered as it
went into the trajectory, and an assistant turn that comes back is replaced by it."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from agentenv.model.types import EMPTY_CONTENT


def _arguments(text: str) -> str:
    try:
        return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    except (ValueError, TypeError):
        return text


def turn_key(message: dict[str, Any]) -> str:
    """What identifies an assistant turn however a harness re-wrote it: its tool calls
    (id, name, arguments as data), or its text when it made none."""
    calls = message.get("tool_calls") or []
    if calls:
        return json.dumps(
            [
                [c.get("id"), c["function"]["name"], _arguments(c["function"]["arguments"])]
                for c in calls
            ]
        )
    return json.dumps(["text", (message.get("content") or "").strip()])


class Replay:
    """The assistant messages the model produced, by :func:`turn_key`."""

    def __init__(self) -> None:
        self._seen: dict[str, list[dict[str, Any]]] = defaultdict(list)

    def remember(self, message: dict[str, Any]) -> None:
        """Keep an assistant history message as it went into the trajectory."""
        self._seen[turn_key(message)].append(message)

    def restore(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` with each assistant turn the model produced put back as produced
        (its reasoning, content and arguments verbatim), in order when the same turn came
        twice; other assistant turns get the placeholder for empty content K3 requires."""
        out = []
        uses: dict[str, int] = defaultdict(int)
        for m in messages:
            if m.get("role") != "assistant":
                out.append(m)
                continue
            key = turn_key(m)
            known = self._seen.get(key)
            if known:
                out.append(known[min(uses[key], len(known) - 1)])
                uses[key] += 1
            elif not m.get("content"):
                out.append({**m, "content": EMPTY_CONTENT})
            else:
                out.append(m)
        return out


__all__ = ["Replay", "turn_key"]
