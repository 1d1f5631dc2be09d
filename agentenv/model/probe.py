"""One cheap request to an endpoint before a job starts: is anybody there, and does it speak
the OpenAI API? ``GET /models`` costs nothing (no tokens), and every OpenAI-compatible
server (Moonshot's API, vLLM, SGLang, the local K3 server) answers it.

A refused connection, an unknown host, a timeout or an answer that is not JSON mean the
job would spend minutes per episode retrying: it stops before the first episode instead. A
refused key is said at once too. Any other HTTP answer means a server is there (a 404 may
mean a base URL without its ``/v1``, which is said, but does not stop anything).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from agentenv.model import wire


class Health(BaseModel):
    """What the probe of one endpoint found."""

    endpoint: str
    up: bool
    """A server is there and answers HTTP with JSON (whatever its status)."""
    auth_refused: bool = False
    """It answered 401 or 403: the key is wrong, or the account cannot be used."""
    detail: str = ""
    """Why it is down or refused, or a warning about an endpoint that is up."""


async def probe(client: Any, name: str, *, timeout_s: float = 10.0) -> Health:
    """Ask ``client`` (an ``openai.AsyncOpenAI``) for its models once, within ``timeout_s``."""
    import openai

    try:
        raw = await client.models.with_raw_response.list(timeout=timeout_s)
    except (openai.AuthenticationError, openai.PermissionDeniedError) as e:
        return Health(endpoint=name, up=False, auth_refused=True, detail=f"{e.status_code}: {e}")
    except openai.APIStatusError as e:
        response = e.response
        if not _json(response):
            return Health(endpoint=name, up=False, detail=_not_api(response))
        hint = " (is the base URL right? it usually ends in /v1)" if e.status_code == 404 else ""
        return Health(endpoint=name, up=True, detail=f"GET /models answered {e.status_code}{hint}")
    except (openai.APIError, OSError) as e:  # refused, unknown host, timeout, not HTTP
        return Health(endpoint=name, up=False, detail=_cannot_reach(e))
    response = raw.http_response
    if not _json(response):
        return Health(endpoint=name, up=False, detail=_not_api(response))
    return Health(endpoint=name, up=True)


def _json(response: Any) -> bool:
    try:
        json.loads(response.content)
    except (ValueError, UnicodeDecodeError):
        return False
    return True


def _not_api(response: Any) -> str:
    return f"answers, but not as an OpenAI API: GET /models gave {wire.describe(response)}"


def _cannot_reach(error: BaseException) -> str:
    why = wire.nobody_there(error)
    if why is None:  # a timeout, or a connection closed without an answer
        why = wire.cause_text(error)
    return f"cannot be reached: {why}"


__all__ = ["Health", "probe"]
