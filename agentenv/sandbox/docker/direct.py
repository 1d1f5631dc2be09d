"""Docker's :class:`~agentenv.sandbox.container.driver.DirectExec`: a sandbox's commands and
files without the executor (images without ``python3``), one ``docker exec`` each
(:mod:`agentenv.sandbox.docker.exec`), raising what the executor's path raises."""

from __future__ import annotations

import errno
import io
import tarfile

import docker.errors

from agentenv.sandbox.channel import StreamClosed
from agentenv.sandbox.container.driver import Explain
from agentenv.sandbox.docker import exec as docker_exec
from agentenv.sandbox.docker.engine import Engine
from agentenv.sandbox.errors import ExecUserError, FileTooLarge, SandboxError, SandboxUnavailable
from agentenv.sandbox.executors import FILE_GUARD_S
from agentenv.sandbox.files import raise_file_error
from agentenv.sandbox.protocol import DEFAULT_MAX_OUTPUT, ExecResult, OutputCallback
from agentenv.sandbox.spec import SandboxSpec

# The file commands (no python3 in the image): plain sh, exit codes the host maps to errno
# (_FILE_ERRNO), so both paths raise the same OSErrors. Unlike the executor they leave the
# mode check to the kernel: with CAP_DAC_OVERRIDE added, root may read and write files
# whose mode denies it here.
_READ = r"""
p=$1
if [ -d "$p" ]; then exit 4; fi
if [ ! -e "$p" ]; then exit 3; fi
if [ ! -f "$p" ]; then exit 5; fi
if [ ! -r "$p" ]; then exit 6; fi
if [ -n "$2" ]; then
  n=$(wc -c < "$p") || exit 6
  if [ "$n" -gt "$2" ]; then echo "$n" >&2; exit 7; fi
  exec head -c "$(($2 + 1))" -- "$p"
fi
exec cat -- "$p"
"""
_WRITE = r"""
p=$1; m=$2
if [ -d "$p" ]; then exit 4; fi
if [ -e "$p" ]; then
  [ -f "$p" ] || exit 5
  [ -w "$p" ] || exit 6
  if [ -n "$m" ]; then chmod "$m" -- "$p" 2>/dev/null || exit 6; fi
  exec cat > "$p"
fi
mkdir -p -- "$(dirname -- "$p")" || exit 1
t="$p.agentenv-$$.tmp"
if cat > "$t" && chmod "${m:-644}" -- "$t" && mv -f -- "$t" "$p"; then exit 0; fi
rm -f -- "$t"; exit 1
"""
_TOO_LARGE = 7
_FILE_ERRNO = {3: errno.ENOENT, 4: errno.EISDIR, 5: errno.EINVAL, 6: errno.EACCES}


class DockerExec:
    """One ``docker exec`` per command in the container ``container_id``."""

    def __init__(
        self, engine: Engine, container_id: str, spec: SandboxSpec, image: str, explain: Explain
    ):
        self._engine = engine
        self._id = container_id
        self._spec = spec
        self._image = image
        self._explain = explain

    async def exec(
        self,
        cmd: str | list[str],
        *,
        timeout: float | None,
        cwd: str | None,
        env: dict[str, str] | None,
        stdin: bytes | None,
        max_output: int,
        on_output: OutputCallback | None,
        user: str | None,
    ) -> ExecResult:
        """Run ``cmd`` (see :meth:`Sandbox.exec`), the engine asked to run it as ``user``."""
        if user:
            await self._check_user(user)
        try:
            result = await docker_exec.run(
                self._engine,
                self._id,
                cmd,
                user=user or self._spec.user,
                workdir=self._spec.workdir,
                timeout=timeout,
                cwd=cwd,
                env=env,
                stdin=stdin,
                max_output=max_output,
                on_output=on_output,
            )
        except (docker.errors.APIError, StreamClosed) as e:
            raise await self._explain(e) from e
        if result.exit_code == 137 and not result.timed_out:
            # Killed: by the OOM killer or the like (a result), or with its container?
            error = await self._explain(StreamClosed("killed"))
            if isinstance(error, SandboxUnavailable):
                raise error
        if result.exit_code == 126 and isinstance(cmd, list):
            said = result.stderr_bytes.strip()
            if said == docker_exec.CANNOT_EXECUTE:
                raise PermissionError(errno.EACCES, "Permission denied", cmd[0])
            if user and said.startswith(b"unable to find user"):  # the engine's words
                raise ExecUserError(
                    f"cannot run as {user!r}: {said.decode(errors='replace')}", user=user
                )
        return result

    async def _run(
        self, argv: list[str], *, stdin: bytes | None = None, max_output: int = DEFAULT_MAX_OUTPUT
    ) -> ExecResult:
        """A file command, as the sandbox's own user, within :data:`FILE_GUARD_S`."""
        return await self.exec(
            argv,
            timeout=FILE_GUARD_S,
            cwd=None,
            env=None,
            stdin=stdin,
            max_output=max_output,
            on_output=None,
            user=None,
        )

    async def check_user_runs(self, cause: BaseException) -> None:
        """Raise :class:`SandboxError` if the spec's user cannot run ``/bin/sh``."""
        try:
            probe = await docker_exec.run(
                self._engine,
                self._id,
                ["/bin/sh", "-c", "exit 0"],
                user=self._spec.user,
                workdir=self._spec.workdir,
                timeout=30,
                cwd=None,
                env=None,
                stdin=None,
                max_output=4096,
                on_output=None,
            )
        except docker.errors.APIError as gone:  # 409 "is not running", say
            raise await self._explain(gone) from gone
        if not probe.ok:
            # Docker often drops its own message ("unable to find user …") from the stream
            # under load; the failed exit is what it reliably gives.
            said = (probe.stdout + probe.stderr).strip() or (
                f"the engine could not start a process as user {self._spec.user!r} "
                f"(exit {probe.exit_code}); a user name must be in the image's "
                "/etc/passwd, a numeric uid[:gid] need not"
            )
            raise SandboxError(f"image {self._image!r}: {said}") from cause

    async def _check_user(self, user: str) -> None:
        """Refuse, as :class:`ExecUserError`, a user or group name the sandbox does not
        know, before ``docker exec`` is asked (the engine's own refusal is sometimes lost
        from the stream under load). The names are looked up in the container's
        /etc/passwd and /etc/group read by the engine, never by running anything in it."""
        name, _, group = user.partition(":")
        for wanted, table in ((name, "/etc/passwd"), (group, "/etc/group")):
            if not wanted or wanted.isdigit():
                continue
            names = await self._names_in(table)
            if names is not None and wanted not in names:
                kind = "user" if table == "/etc/passwd" else "group"
                raise ExecUserError(
                    f"agentenv: unable to find {kind} {wanted}: no such {kind} in the sandbox",
                    user=user,
                )

    async def _names_in(self, table: str) -> set[str] | None:
        """The names in a colon-separated table file of the sandbox (``None``: unreadable,
        not a regular file, or over 4 MiB: left to the engine to judge)."""

        def fetch() -> bytes | None:
            chunks, _ = self._engine.api.get_archive(self._id, table, chunk_size=1 << 20)
            buf = io.BytesIO()
            try:
                for chunk in chunks:
                    buf.write(chunk)
                    if buf.tell() > 4 << 20:
                        return None
            finally:
                chunks.close()
            buf.seek(0)
            with tarfile.open(fileobj=buf) as tar:
                member = tar.next()
                if member is None or not member.isfile():
                    return None
                file = tar.extractfile(member)
                return file.read() if file is not None else None

        try:
            data = await self._engine.run(fetch)
        except docker.errors.NotFound:
            return set()
        except (docker.errors.APIError, tarfile.TarError):
            return None
        if data is None:
            return None
        return {line.split(b":", 1)[0].decode(errors="replace") for line in data.splitlines()}

    async def read_file(self, path: str, max_bytes: int | None) -> bytes:
        """The file's bytes, read by ``sh`` (see :meth:`Sandbox.read_file`)."""
        limit = "" if max_bytes is None else str(max_bytes)
        # read at most one byte past the limit: the file may have grown (or been swapped
        # for a link to a bigger one) since its size was taken
        result = await self._run(
            ["/bin/sh", "-c", _READ, "agentenv-read", path, limit],
            max_output=1 << 62 if max_bytes is None else max_bytes + 1,
        )
        if result.timed_out:
            raise SandboxError(f"reading {path} took over {FILE_GUARD_S:g} s (a FIFO?)")
        if max_bytes is not None and len(result.stdout_bytes) > max_bytes:
            raise FileTooLarge(
                f"{path} is larger than {max_bytes} bytes (it grew while read)",
                path=path,
                size=len(result.stdout_bytes),
                limit=max_bytes,
            )
        if result.exit_code == _TOO_LARGE:
            size = result.stderr.strip()
            raise FileTooLarge(
                f"{path} is larger than {max_bytes} bytes ({size})",
                path=path,
                size=int(size) if size.isdigit() else 0,
                limit=max_bytes or 0,
            )
        raise_file_error(result, path, _FILE_ERRNO)
        return result.stdout_bytes

    async def write_file(self, path: str, data: bytes, mode: int | None) -> None:
        """Create or rewrite ``path`` by ``sh`` (see :meth:`Sandbox.write_file`)."""
        wanted = "" if mode is None else f"{mode:o}"
        result = await self._run(
            ["/bin/sh", "-c", _WRITE, "agentenv-write", path, wanted], stdin=data
        )
        if result.timed_out:
            raise SandboxError(f"writing {path} took over {FILE_GUARD_S:g} s (a FIFO?)")
        raise_file_error(result, path, _FILE_ERRNO)
