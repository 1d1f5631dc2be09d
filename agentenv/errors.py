"""Every error agentenv raises, in one tree. Foreign errors are mapped where they enter: the
Docker backend maps ``docker.errors`` to :class:`SandboxError` kinds, the OpenAI client maps
``openai`` errors to :class:`ModelError` kinds (the original is the ``__cause__``), so nothing
above those edges needs either library's exceptions::

    AgentenvError
    ├── SandboxError              a sandbox failed
    │   ├── EngineUnavailable       no engine answers (how to start one is in the message)
    │   ├── ImageUnavailable        not present, not pullable, not buildable
    │   │   └── BuildTimedOut         its build passed the task's build timeout (stopped)
    │   ├── SandboxUnavailable      the container died, was OOM-killed or removed
    │   ├── SandboxClosed           closed by its owner
    │   ├── SandboxPaused           a command sent while paused
    │   ├── ArchiveTooLarge         a download passed the size its caller allowed
    │   ├── FileTooLarge            a file read passed the size its caller allowed
    │   └── ExecUserError           exec(user=) names no user there, or may not switch
    ├── ModelError                a model endpoint failed
    │   ├── EndpointUnavailable     connection refused or dropped, timeout, 5xx: transient
    │   │   ├── RateLimited           429 (``retry_after_s``: the server's hint)
    │   │   ├── StreamCut             the stream ended before a finish reason
    │   │   ├── MalformedAnswer       it answered, but not in the wire format (first line quoted)
    │   │   ├── EndpointDown          its breaker is open: connection failures in a row
    │   │   └── AllEndpointsDown      every endpoint a task may use is down
    │   ├── AuthError               401/403: the key or the account; nothing will work
    │   ├── BadRequest              the endpoint refused the request (400, 404, 422)
    │   │   └── ContextOverflow       the conversation no longer fits the context window
    │   └── NoRoute                 the routing rules leave no endpoint for a task
    ├── TaskError                 a task cannot be loaded or run (file and field named)
    └── JobError                  a job cannot go on
        ├── ConfigMismatch          its folder holds a different job
        └── JobStopped              stopped before every episode ran (a budget, say)

``runner.outcomes.classify`` turns each into what the job does (retry, grade, stop).
"""

from __future__ import annotations

__all__ = [
    "AgentenvError",
    "AllEndpointsDown",
    "ArchiveTooLarge",
    "AuthError",
    "BadRequest",
    "BuildTimedOut",
    "ConfigMismatch",
    "ContextOverflow",
    "EndpointDown",
    "EndpointUnavailable",
    "EngineUnavailable",
    "ExecUserError",
    "FileTooLarge",
    "ImageUnavailable",
    "JobError",
    "JobStopped",
    "MalformedAnswer",
    "ModelError",
    "NoRoute",
    "RateLimited",
    "SandboxClosed",
    "SandboxError",
    "SandboxPaused",
    "SandboxUnavailable",
    "StreamCut",
    "TaskError",
]


class AgentenvError(Exception):
    """Base class of every error agentenv raises."""


# -- sandboxes ------------------------------------------------------------------------------


class SandboxError(AgentenvError):
    """Base class of every sandbox failure."""


class EngineUnavailable(SandboxError):
    """The Docker engine cannot be reached (not installed, not started, or no permission)."""


class ImageUnavailable(SandboxError):
    """An image is not present, cannot be pulled and cannot be built."""


class BuildTimedOut(ImageUnavailable):
    """An image's build went on past the time allowed it (a Harbor task's
    ``build_timeout_sec``) and was stopped; ``timeout_s`` is that time."""

    def __init__(self, message: str, timeout_s: float | None = None):
        super().__init__(message)
        self.timeout_s = timeout_s


class SandboxUnavailable(SandboxError):
    """The sandbox's container is gone or stopped: killed, OOM-killed, removed, or the engine
    restarted. The episode using it cannot go on; retry it in a new sandbox."""


class SandboxClosed(SandboxError):
    """The sandbox was closed by its owner and cannot be used any more."""


class SandboxPaused(SandboxError):
    """A command was sent to a paused sandbox; call ``resume()`` first."""


class ArchiveTooLarge(SandboxError):
    """A download's archive grew past the size its caller allowed (a sparse file, say: a
    bounded workdir can hold one far larger than its bound); nothing more was read."""


class FileTooLarge(SandboxError):
    """``read_file(max_bytes=...)`` found a file larger than its caller allowed; nothing of it
    was transferred (the size is checked in the sandbox before the read)."""

    def __init__(self, message: str, *, path: str = "", size: int = 0, limit: int = 0):
        super().__init__(message)
        self.path = path
        self.size = size
        """The size seen (at least; a file growing while read is stopped at the limit)."""
        self.limit = limit


class ExecUserError(SandboxError):
    """``exec(user=...)`` cannot run the command as that user, so nothing ran: ``reason`` is
    ``"unknown"`` (no such user or group in the sandbox) or ``"not_permitted"`` (the sandbox
    may not switch users: its spec lacks CAP_SETUID/CAP_SETGID, or its user is not root)."""

    def __init__(self, message: str, *, user: str = "", reason: str = "unknown"):
        super().__init__(message)
        self.user = user
        self.reason = reason


# -- models ---------------------------------------------------------------------------------


class ModelError(AgentenvError):
    """Base class of every model endpoint failure. ``status_code`` is the HTTP status when
    there was one."""

    def __init__(self, message: str, *, status_code: int | None = None):
        super().__init__(message)
        self.status_code = status_code


class EndpointUnavailable(ModelError):
    """The endpoint could not answer: connection refused or dropped, a timeout, a 5xx.
    Transient: the client retries it; raised once its retries are spent.
    ``retry_after_s`` is the server's own wait hint (a 503's or 429's), if any."""

    def __init__(
        self, message: str, *, status_code: int | None = None, retry_after_s: float | None = None
    ):
        super().__init__(message, status_code=status_code)
        self.retry_after_s = retry_after_s


class RateLimited(EndpointUnavailable):
    """429: too many requests."""


class StreamCut(EndpointUnavailable):
    """The stream ended without a finish reason: the connection dropped mid-answer."""


class MalformedAnswer(EndpointUnavailable):
    """The endpoint answered, but not with an OpenAI-compatible chat completion (not HTTP,
    not a stream of JSON chunks, bytes that are not UTF-8, chunks of the wrong shape): the
    wrong URL, or a broken server. The message quotes the first line of what came back.
    It counts toward the endpoint's breaker like a refused connection."""


class EndpointDown(EndpointUnavailable):
    """The endpoint failed to connect (or answered garbage) so many times in a row that its
    breaker opened: requests to it fail at once, without waiting, until a trial request
    after the breaker's cool-down gets through. ``reason`` is the last failure."""

    def __init__(self, message: str, *, reason: str = ""):
        super().__init__(message)
        self.reason = reason


class AllEndpointsDown(EndpointUnavailable):
    """Every endpoint this task may use is down; the episode fails, the job goes on."""


class AuthError(ModelError):
    """401/403: the key is wrong or the account cannot be used; every request would fail."""


class BadRequest(ModelError):
    """The endpoint refused the request (400, 404, 422): a bug or a misconfiguration;
    retrying cannot help."""


class ContextOverflow(BadRequest):
    """The conversation no longer fits the model's context window: the episode ends with
    stop reason ``context_length``; retrying cannot help."""


class NoRoute(ModelError):
    """No endpoint may serve this task: the routing rules exclude them all."""


# -- tasks and jobs -------------------------------------------------------------------------


class TaskError(AgentenvError, ValueError):
    """A task folder or value that cannot be used; the message names the file and field."""


class JobError(AgentenvError):
    """Base class of the failures that stop a job."""


class ConfigMismatch(JobError):
    """The job folder holds a different job; the message says what differs."""


class JobStopped(JobError):
    """The job stopped early: an outcome whose policy is to stop everything (a refused key),
    or the sandbox engine in trouble past the job's patience (``resumable``: running the
    same job again later goes on where it stopped, with nothing to fix first)."""

    def __init__(self, message: str, *, resumable: bool = False):
        super().__init__(message)
        self.resumable = resumable
