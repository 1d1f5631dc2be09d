"""Errors raised by sandboxes. Every one says what failed and, where there is one, what to do."""


class SandboxError(Exception):
    """Base class of every sandbox failure."""


class EngineUnavailable(SandboxError):
    """The Docker engine cannot be reached (not installed, not started, or no permission)."""


class ImageUnavailable(SandboxError):
    """An image is not present, cannot be pulled and cannot be built."""


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
