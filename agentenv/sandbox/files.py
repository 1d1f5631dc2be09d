"""Host-side file helpers every backend shares: tar archives of host folders (owned by the
sandbox's user), and local ``OSError``s from a file command's exit."""

from __future__ import annotations

import errno
import os
import tarfile
from pathlib import Path
from typing import IO

from agentenv.sandbox.protocol import ExecResult


def tmpfs_owner(user: str | None) -> str:
    """Mount options making a numeric ``uid[:gid]`` own the workdir volume's root."""
    if not user:
        return ""
    uid, _, gid = user.partition(":")
    if not uid.isdigit() or (gid and not gid.isdigit()):
        return ""  # a name: the engine resolves it, we cannot; the owner is fixed on upload
    return f",uid={uid},gid={gid or uid}"


def numeric_owner(user: str | None) -> tuple[int, int]:
    """The uid and gid uploaded files get: the sandbox's user when numeric, else root (the
    host user's uid means nothing in the sandbox, and makes git refuse the repo)."""
    uid, _, gid = (user or "0").partition(":")
    if not uid.isdigit() or (gid and not gid.isdigit()):
        return 0, 0
    return int(uid), int(gid or uid)


def write_tar(file: IO[bytes], src: Path, owner: tuple[int, int] = (0, 0)) -> None:
    def own(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid, info.gid = owner
        info.uname = info.gname = ""
        return info

    with tarfile.open(fileobj=file, mode="w") as tar:
        if src.is_dir():
            for child in sorted(src.iterdir()):
                tar.add(child, arcname=child.name, filter=own)
        else:
            tar.add(src, arcname=src.name, filter=own)


def raise_file_error(result: ExecResult, path: str, codes: dict[int, int]) -> None:
    """Raise the ``OSError`` a local call would have for a file command's failed exit:
    ``codes`` maps the command's own exit codes to errno values (so a missing file is a
    ``FileNotFoundError`` saying "No such file or directory", never "exit code 3"); any
    other failure is judged from what the command said."""
    if result.exit_code == 0:
        return
    said = result.stderr.strip()
    number = codes.get(result.exit_code)
    if number is None:
        number = errno.EACCES if "ermission denied" in said else errno.EIO
        # OSError picks the subclass from the errno (EACCES: PermissionError)
        raise OSError(number, said or f"failed with exit code {result.exit_code}", path)
    # EINVAL is what both paths raise for a FIFO, a device, a socket: said as the executor does
    said = "not a regular file" if number == errno.EINVAL else os.strerror(number)
    raise OSError(number, said, path)
