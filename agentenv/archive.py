"""``Archive``: a tar archive kept in a file on the host, so that a workspace of any size
(a repo with a 400 MB file, say) crosses between the host and sandboxes in chunks instead
of being held in memory once per copy and per concurrent episode."""

from __future__ import annotations

import contextlib
import os
import tempfile
import weakref
from pathlib import Path
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from agentenv import scratch

__all__ = ["Archive"]


class Archive(os.PathLike[str]):
    """A tar file on the host. :meth:`temporary` (and :meth:`from_bytes`) make a temporary
    file that is removed when the object is garbage-collected; ``Archive(path)`` refers to
    a file someone else owns and leaves it alone. It is a path-like object: pass it where a
    tar file's path is wanted (``Sandbox.upload_tar``, ``open``).

    In a pydantic model it validates from an ``Archive`` or the archive's bytes, and
    serialises to its bytes (base64 in JSON, with the model's ``ser_json_bytes``), so a
    model carrying one stays JSON-serialisable."""

    def __init__(self, path: str | os.PathLike[str], *, temporary: bool = False):
        self.path = Path(path)
        self.temporary = temporary
        if temporary:
            weakref.finalize(self, _remove, str(self.path))

    @classmethod
    def new(cls) -> Archive:
        """An empty temporary file to write a tar into."""
        # named by its owner process: a killed runner's are collected (see scratch)
        fd, name = tempfile.mkstemp(prefix=scratch.prefix("archive"), suffix=".tar")
        os.close(fd)
        return cls(name, temporary=True)

    @classmethod
    def from_bytes(cls, data: bytes) -> Archive:
        """A temporary file holding ``data``."""
        archive = cls.new()
        archive.path.write_bytes(data)
        return archive

    def read_bytes(self) -> bytes:
        """The whole archive in memory (for small archives and serialisation)."""
        return self.path.read_bytes()

    @property
    def size(self) -> int:
        """The archive's size in bytes."""
        return self.path.stat().st_size

    def __fspath__(self) -> str:
        return str(self.path)

    def __reduce__(self) -> tuple[Any, ...]:
        # A temporary file is removed with the object that made it: a copy in another
        # process (Ray, multiprocessing) carries the contents instead of the path.
        if self.temporary:
            return (Archive.from_bytes, (self.read_bytes(),))
        return (Archive, (str(self.path),))

    def __repr__(self) -> str:
        return f"Archive({str(self.path)!r}{', temporary=True' if self.temporary else ''})"

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        read = core_schema.no_info_plain_validator_function(cls.from_bytes)
        from_bytes = core_schema.chain_schema([core_schema.bytes_schema(), read])
        return core_schema.json_or_python_schema(
            json_schema=from_bytes,
            python_schema=core_schema.union_schema(
                [core_schema.is_instance_schema(cls), from_bytes]
            ),
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda archive: archive.read_bytes(), return_schema=core_schema.bytes_schema()
            ),
        )


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
