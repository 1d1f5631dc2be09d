"""Host-side file helpers every backend shares: tar archives of host folders (owned by the
sandbox's user), and local ``OSError``s from a file command's exit."""

from __future__ import annotations

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


def raise_file_error(result: ExecResult, path: str, codes: dict[int, type[OSError]]) -> None:
    if result.exit_code == 0:
        return
    message = result.stderr.strip() or f"exit code {result.exit_code}"
    error = codes.get(result.exit_code)
    if error is None:
        error = PermissionError if "ermission denied" in message else OSError
    raise error(result.exit_code, message, path)
