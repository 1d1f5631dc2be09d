"""The conformance suite every :class:`~agentenv.sandbox.Sandbox` implementation must pass.

Use it from a test module that provides two fixtures, then star-import the tests::

    @pytest.fixture(scope="module")
    async def sandbox():            # one shared sandbox for the read-mostly tests
        async with make_my_sandbox() as box:
            yield box

    @pytest.fixture
    def make_sandbox():             # async callable returning a fresh, unshared sandbox
        return make_my_sandbox_async

    from agentenv.testing.conformance import *  # noqa: F403

Each test asserts on behaviour a user depends on, and fails when that behaviour is missing.
"""

from __future__ import annotations

import errno
import io
import os
import tarfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from agentenv.sandbox.errors import ArchiveTooLarge, ExecUserError, FileTooLarge, SandboxClosed
from agentenv.sandbox.protocol import Sandbox

pytestmark = pytest.mark.anyio

MakeSandbox = Callable[[], Awaitable[Sandbox]]


def _unique(name: str) -> str:
    return f"/tmp/conformance-{uuid.uuid4().hex[:8]}-{name}"


async def test_exit_codes(sandbox: Sandbox) -> None:
    assert (await sandbox.exec("exit 0")).exit_code == 0
    assert (await sandbox.exec("exit 3")).exit_code == 3
    assert (await sandbox.exec(["false"])).exit_code == 1
    assert (await sandbox.exec(["sh", "-c", "exit 42"])).exit_code == 42


async def test_command_not_found_is_127(sandbox: Sandbox) -> None:
    assert (await sandbox.exec("no-such-command-xyz")).exit_code == 127
    result = await sandbox.exec(["no-such-binary-xyz"])
    assert result.exit_code == 127
    assert not result.ok


async def test_stdout_and_stderr_are_separate(sandbox: Sandbox) -> None:
    result = await sandbox.exec("echo out; echo err >&2; echo out2")
    assert result.stdout == "out\nout2\n"
    assert result.stderr == "err\n"
    assert result.duration_s > 0


async def test_shell_string_runs_in_bash_when_present(sandbox: Sandbox) -> None:
    result = await sandbox.exec("if [[ -n $BASH_VERSION ]]; then echo bash; fi")
    assert result.stdout.strip() == "bash"


async def test_env_is_per_call(sandbox: Sandbox) -> None:
    result = await sandbox.exec("echo $GREETING", env={"GREETING": "hello world"})
    assert result.stdout == "hello world\n"
    assert (await sandbox.exec("echo ${GREETING:-unset}")).stdout == "unset\n"


async def test_default_cwd_is_not_root(sandbox: Sandbox) -> None:
    cwd = (await sandbox.exec("pwd")).stdout.strip()
    assert cwd.startswith("/") and cwd != "/"


async def test_cwd(sandbox: Sandbox) -> None:
    assert (await sandbox.exec("pwd", cwd="/tmp")).stdout == "/tmp\n"
    assert (await sandbox.exec(["pwd"], cwd="/usr/bin")).stdout == "/usr/bin\n"
    missing = await sandbox.exec("pwd", cwd="/no/such/dir")
    assert missing.exit_code != 0
    assert "/no/such/dir" in missing.stderr


async def test_stdin(sandbox: Sandbox) -> None:
    assert (await sandbox.exec("cat", stdin=b"some input\n")).stdout == "some input\n"
    blob = os.urandom(1 << 20)
    result = await sandbox.exec(["sh", "-c", "cat | sha256sum"], stdin=blob)
    import hashlib

    assert result.stdout.split()[0] == hashlib.sha256(blob).hexdigest()


async def test_stdin_the_command_does_not_read(sandbox: Sandbox) -> None:
    result = await sandbox.exec("head -c 10 | wc -c", stdin=os.urandom(4 << 20))
    assert result.stdout.strip() == "10"
    assert (await sandbox.exec("echo still fine")).stdout == "still fine\n"


async def test_no_stdin_means_eof(sandbox: Sandbox) -> None:
    result = await sandbox.exec("cat; echo done", timeout=10)
    assert result.stdout == "done\n" and not result.timed_out


async def test_timeout_kills_the_process_tree(sandbox: Sandbox) -> None:
    marker = _unique("tree")
    script = f"sleep 301 & echo $! > {marker}; sleep 302; echo never"
    result = await sandbox.exec(script, timeout=1)
    assert result.timed_out
    assert result.exit_code != 0
    assert "never" not in result.stdout
    assert result.duration_s < 10
    child = (await sandbox.exec(["cat", marker])).stdout.strip()
    assert child.isdigit()
    # Both the command and the child it started are gone from the sandbox, not just the client.
    alive = await sandbox.exec(f"kill -0 {child} 2>/dev/null && echo alive || echo gone")
    assert alive.stdout.strip() == "gone"
    left = await sandbox.exec("ps -eo args | grep -E '^sleep 30[12]' || true")
    assert left.stdout.strip() == ""


async def test_timeout_holds_after_the_command_closes_its_output(sandbox: Sandbox) -> None:
    result = await sandbox.exec("exec >/dev/null 2>&1; sleep 303", timeout=1)
    assert result.timed_out
    assert result.duration_s < 10
    left = await sandbox.exec("ps -eo args | grep -E '^sleep 303' || true")
    assert left.stdout.strip() == ""


async def test_timeout_kills_offspring_that_left_the_tree(sandbox: Sandbox) -> None:
    # The subshell exits at once, so `sleep 304` is adopted by PID 1 in a session of its own.
    result = await sandbox.exec("(setsid sleep 304 &); sleep 300", timeout=1)
    assert result.timed_out
    left = await sandbox.exec("ps -eo args | grep -E '^sleep 30[04]' || true")
    assert left.stdout.strip() == ""


async def test_sandbox_usable_after_timeout(sandbox: Sandbox) -> None:
    assert (await sandbox.exec("sleep 5", timeout=0.5)).timed_out
    assert (await sandbox.exec("echo still here")).stdout == "still here\n"


async def test_background_writer_does_not_hold_the_command(sandbox: Sandbox) -> None:
    # The background loop inherits stdout and never stops writing; the call still returns.
    script = "sh -c 'while :; do echo bg-noise; sleep 0.01; done' & echo main"
    try:
        result = await sandbox.exec(script, timeout=20)
        assert not result.timed_out
        assert result.exit_code == 0
        assert "main" in result.stdout
    finally:
        await sandbox.exec("pkill -f 'echo bg-noise' || true")


async def test_large_output_is_capped_keeping_head_and_tail(sandbox: Sandbox) -> None:
    result = await sandbox.exec("seq 1 400000", max_output=64 * 1024)  # ~2.6 MB
    assert result.truncated
    assert len(result.stdout_bytes) < 64 * 1024 + 200
    lines = result.stdout.splitlines()
    assert lines[0] == "1"
    assert lines[-1] == "400000"
    assert "elided" in result.stdout


async def test_output_under_the_cap_is_exact(sandbox: Sandbox) -> None:
    result = await sandbox.exec("head -c 1500000 /dev/zero | tr '\\0' a", max_output=2 << 20)
    assert not result.truncated
    assert result.stdout_bytes == b"a" * 1_500_000


async def test_stderr_capped_independently(sandbox: Sandbox) -> None:
    result = await sandbox.exec("seq 1 200000 >&2; echo small", max_output=10_000)
    assert result.truncated
    assert result.stdout == "small\n"
    assert result.stderr.splitlines()[-1] == "200000"


async def test_binary_and_invalid_utf8_output(sandbox: Sandbox) -> None:
    result = await sandbox.exec(["printf", "\\000\\377\\376abc\\300"])
    assert result.stdout_bytes == b"\x00\xff\xfeabc\xc0"
    assert "abc" in result.stdout  # decoding replaces, never raises


async def test_output_callback_receives_chunks(sandbox: Sandbox) -> None:
    seen: list[tuple[str, bytes]] = []

    async def on_output(stream: str, data: bytes) -> None:
        seen.append((stream, data))

    result = await sandbox.exec(
        "for i in 1 2 3; do echo line$i; sleep 0.05; done; echo oops >&2", on_output=on_output
    )
    assert (
        b"".join(d for s, d in seen if s == "stdout")
        == result.stdout_bytes
        == b"line1\nline2\nline3\n"
    )
    assert b"".join(d for s, d in seen if s == "stderr") == b"oops\n"


async def test_callback_errors_reach_the_caller_unchanged(sandbox: Sandbox) -> None:
    class Stop(Exception):
        pass

    def on_output(stream: str, data: bytes) -> None:
        raise Stop

    with pytest.raises(Stop):
        await sandbox.exec("echo hi", on_output=on_output)
    assert (await sandbox.exec("echo after")).stdout == "after\n"


async def test_concurrent_commands_run_at_once(sandbox: Sandbox) -> None:
    flag = _unique("go")
    waiter_out: list[str] = []

    async def waiter() -> None:
        r = await sandbox.exec(
            f"while [ ! -f {flag} ]; do sleep 0.02; done; echo released", timeout=20
        )
        waiter_out.append(r.stdout)

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.sleep(0.2)
        # If commands were serialised this would wait behind the waiter, which waits for it.
        await sandbox.exec(["touch", flag], timeout=20)
    assert waiter_out == ["released\n"]


async def test_file_round_trip_5mb_binary(sandbox: Sandbox) -> None:
    data = os.urandom(5 * 1024 * 1024)
    path = _unique("blob.bin")
    await sandbox.write_file(path, data)
    assert await sandbox.read_file(path) == data
    size = await sandbox.exec(["stat", "-c", "%s", path])
    assert size.stdout.strip() == str(len(data))


async def test_write_creates_parents_and_replaces(sandbox: Sandbox) -> None:
    path = _unique("a/b/c/file.txt")
    await sandbox.write_file(path, b"one")
    await sandbox.write_file(path, b"two")
    assert await sandbox.read_file(path) == b"two"
    assert (await sandbox.exec(["cat", path])).stdout == "two"


async def test_unicode_paths(sandbox: Sandbox) -> None:
    path = _unique("ünïcödé 文件 ✓.txt")
    await sandbox.write_file(path, "grüße\n".encode())
    assert (await sandbox.read_file(path)).decode() == "grüße\n"
    listed = await sandbox.exec(["ls", "/tmp"])
    assert Path(path).name in listed.stdout


async def test_file_modes(sandbox: Sandbox) -> None:
    script = _unique("run.sh")
    await sandbox.write_file(script, b"#!/bin/sh\necho ran\n", mode=0o755)
    assert (await sandbox.exec([script])).stdout == "ran\n"
    private = _unique("private")
    await sandbox.write_file(private, b"secret", mode=0o600)
    assert (await sandbox.exec(["stat", "-c", "%a", private])).stdout.strip() == "600"


async def test_permission_denied_without_capabilities(sandbox: Sandbox) -> None:
    # Even root cannot read a mode-000 file once CAP_DAC_OVERRIDE is dropped.
    locked = _unique("locked")
    await sandbox.write_file(locked, b"x", mode=0o000)
    with pytest.raises(PermissionError):
        await sandbox.read_file(locked)


async def test_read_errors(sandbox: Sandbox) -> None:
    with pytest.raises(FileNotFoundError) as info:
        await sandbox.read_file("/no/such/file")
    assert "/no/such/file" in str(info.value)
    with pytest.raises(IsADirectoryError):
        await sandbox.read_file("/tmp")


async def test_reading_a_planted_fifo_does_not_hang(sandbox: Sandbox) -> None:
    fifo = _unique("result.json")
    assert (await sandbox.exec(["mkfifo", fifo])).exit_code == 0
    with anyio.fail_after(20), pytest.raises(OSError, match="not a regular file"):
        await sandbox.read_file(fifo)


async def test_upload_folder_and_download_tar(sandbox: Sandbox, tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "a.txt").write_text("alpha")
    (tmp_path / "pkg" / "sub" / "b.bin").write_bytes(b"\x00\x01beta")
    dest = _unique("uploaded")
    await sandbox.upload(tmp_path / "pkg", dest)
    assert (await sandbox.exec(["cat", f"{dest}/a.txt"])).stdout == "alpha"
    assert await sandbox.read_file(f"{dest}/sub/b.bin") == b"\x00\x01beta"

    base = Path(dest).name
    with tarfile.open(fileobj=io.BytesIO(await sandbox.download(dest))) as archive:
        assert {f"{base}/a.txt", f"{base}/sub/b.bin"} <= set(archive.getnames())
        member = archive.extractfile(f"{base}/sub/b.bin")
        assert member is not None and member.read() == b"\x00\x01beta"
    with pytest.raises(FileNotFoundError):
        await sandbox.download("/no/such/path")


async def test_upload_tar_extracts_into_a_folder_and_download_works_paused(
    sandbox: Sandbox,
) -> None:
    dest = _unique("extracted")
    assert (await sandbox.exec(["mkdir", "-p", dest])).exit_code == 0
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("top.txt", b"top"), ("deep/er.txt", b"deeper")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    await sandbox.upload_tar(buf.getvalue(), dest)
    assert await sandbox.read_file(f"{dest}/deep/er.txt") == b"deeper"
    await sandbox.pause()
    try:  # the final state is read with the sandbox frozen
        archive = await sandbox.download(dest)
    finally:
        await sandbox.resume()
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        assert f"{Path(dest).name}/top.txt" in tar.getnames()


async def test_tar_files_on_the_host_go_in_and_come_out(sandbox: Sandbox, tmp_path: Path) -> None:
    # The streamed forms: a tar file's path in, a tar file written on the host out.
    dest = _unique("from-file")
    assert (await sandbox.exec(["mkdir", "-p", dest])).exit_code == 0
    payload = os.urandom(3 << 20)
    sent = tmp_path / "in.tar"
    with tarfile.open(sent, mode="w") as tar:
        info = tarfile.TarInfo("big.bin")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    await sandbox.upload_tar(sent, dest)
    assert await sandbox.read_file(f"{dest}/big.bin") == payload
    for frozen in (False, True):  # a backend may read a frozen sandbox another way
        if frozen:
            await sandbox.pause()
        try:
            got = tmp_path / f"out-{frozen}.tar"
            await sandbox.download_to(dest, got)
            with tarfile.open(got) as tar:
                member = tar.extractfile(f"{Path(dest).name}/big.bin")
                assert member is not None and member.read() == payload
            with pytest.raises(ArchiveTooLarge):  # stops there: a sparse file can be huge
                await sandbox.download_to(dest, tmp_path / "cut.tar", max_bytes=1 << 20)
            with pytest.raises(FileNotFoundError):
                await sandbox.download_to("/no/such/path", tmp_path / "none.tar")
        finally:
            await sandbox.resume()
    with pytest.raises(FileNotFoundError):
        await sandbox.upload_tar(sent, "/no/such/folder")


async def test_a_tar_padded_past_its_end_goes_in(sandbox: Sandbox) -> None:
    # Python pads a tar to 10 KiB records: here 8.5 KiB of zeros follow the end blocks, past
    # a pipe's 64 KiB (a reader that stops at the end must not fail the upload).
    dest = _unique("padded")
    assert (await sandbox.exec(["mkdir", "-p", dest])).exit_code == 0
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("a.bin", os.urandom(60_000)), ("b.txt", b"x" * 100)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    sent = buf.getvalue()
    assert len(sent) == 71_680 and not sent[-8000:].strip(b"\0")
    await sandbox.upload_tar(sent, dest)
    assert await sandbox.read_file(f"{dest}/b.txt") == b"x" * 100
    assert len(await sandbox.read_file(f"{dest}/a.bin")) == 60_000


def _members(tar: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        return {m.name: m for m in t.getmembers()}


async def test_frozen_reads_never_reach_the_host(make_sandbox: MakeSandbox) -> None:
    # A root agent points the workdir, and a link in it, at places that exist on the host
    # too; a frozen read (done by host root where the backend may: see nsop.py) must see
    # the container's.
    async with await make_sandbox() as box:
        done = await box.exec(
            "echo planted > /etc/agentenv-marker && mkdir -p /w && ln -s /etc/hostname /w/h"
            " && ln -s /etc /w/etc && rm -rf /workspace && ln -s /etc /workspace"
        )
        assert done.ok, done
        await box.pause()
        top = _members(await box.download("/workspace"))
        assert list(top) == ["workspace"] and top["workspace"].issym()  # stored, not followed
        links = _members(await box.download("/w"))
        assert links["w/h"].issym() and links["w/etc"].issym() and len(links) == 3
        with tarfile.open(fileobj=io.BytesIO(await box.download("/etc/hostname"))) as t:
            name = t.extractfile("hostname")
            assert name is not None and name.read().strip() == b"sandbox"  # not the host's
        marker = await box.download("/etc/agentenv-marker")
        assert b"planted" in marker
        await box.resume()


LEASE = """
import fcntl, os, time
fd = os.open("leased.txt", os.O_RDONLY)
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
open("ready", "w").close()
time.sleep(600)
"""


async def test_a_file_leased_by_a_frozen_process_is_left_out_not_a_failure(
    make_sandbox: MakeSandbox,
) -> None:
    # An agent holding a write lease makes every other open of that file wait for the lease
    # to break (or fail, non-blocking): the frozen read must still give the rest, so that
    # the agent cannot turn its own grade into an infrastructure error.
    async with await make_sandbox() as box:
        await box.write_file("/workspace/leased.txt", b"secret answer")
        await box.write_file("/workspace/other.txt", b"kept")
        await box.write_file("/workspace/lease.py", LEASE.encode())
        await box.exec("nohup python3 lease.py >/dev/null 2>&1 &")
        await box.exec("for i in $(seq 50); do [ -e ready ] && break; sleep 0.1; done")
        await box.pause()
        names = _members(await box.download("/workspace"))
        await box.resume()
    assert "workspace/other.txt" in names and "workspace/leased.txt" not in names


async def test_closed_sandbox_refuses_every_call(make_sandbox: MakeSandbox) -> None:
    box = await make_sandbox()
    assert (await box.exec("true")).exit_code == 0
    await box.close()
    await box.close()  # idempotent
    with pytest.raises(SandboxClosed):
        await box.exec("true")
    with pytest.raises(SandboxClosed):
        await box.read_file("/etc/hostname")
    with pytest.raises(SandboxClosed):
        await box.write_file("/tmp/x", b"")
    with pytest.raises(SandboxClosed):
        await box.pause()
    with pytest.raises(SandboxClosed):
        await box.snapshot()
    with pytest.raises(SandboxClosed):
        await box.download_to("/tmp", Path(os.devnull))


# -- what Inspect AI's sandbox self-check exposed: file errors as a local call raises them,
# launch failures typed, users by name, a size limit checked before a read -----------------


async def test_write_over_a_read_only_file_is_refused(sandbox: Sandbox) -> None:
    path = _unique("read-only.txt")
    await sandbox.write_file(path, b"original")
    assert (await sandbox.exec(["chmod", "a-w", path])).ok
    with pytest.raises(PermissionError) as info:
        await sandbox.write_file(path, b"replaced")
    assert path in str(info.value)
    assert await sandbox.read_file(path) == b"original"  # neither replaced nor truncated
    assert (await sandbox.exec(["stat", "-c", "%a", path])).stdout.strip() == "444"


async def test_write_over_an_existing_file_keeps_it(sandbox: Sandbox) -> None:
    # Rewritten in place, as open(path, "w") does: mode kept, symlinks followed.
    target = _unique("target.sh")
    await sandbox.write_file(target, b"#!/bin/sh\necho one\n", mode=0o750)
    await sandbox.write_file(target, b"#!/bin/sh\necho two\n")
    assert (await sandbox.exec(["stat", "-c", "%a", target])).stdout.strip() == "750"
    assert (await sandbox.exec([target])).stdout == "two\n"
    link = _unique("link.sh")
    assert (await sandbox.exec(["ln", "-s", target, link])).ok
    await sandbox.write_file(link, b"#!/bin/sh\necho three\n")
    assert (await sandbox.exec(["readlink", link])).stdout.strip() == target
    assert (await sandbox.exec([target])).stdout == "three\n"
    await sandbox.write_file(target, b"data", mode=0o600)  # a mode given is set
    assert (await sandbox.exec(["stat", "-c", "%a", target])).stdout.strip() == "600"


async def test_file_errors_carry_the_right_errno(sandbox: Sandbox) -> None:
    folder = _unique("a-folder")
    assert (await sandbox.exec(["mkdir", "-p", folder])).ok
    with pytest.raises(IsADirectoryError) as read_dir:
        await sandbox.read_file(folder)
    with pytest.raises(IsADirectoryError) as write_dir:
        await sandbox.write_file(folder, b"x")
    with pytest.raises(FileNotFoundError) as missing:
        await sandbox.read_file(f"{folder}/missing")
    for info, number in ((read_dir, errno.EISDIR), (write_dir, errno.EISDIR)):
        assert info.value.errno == number and "directory" in str(info.value)
    assert missing.value.errno == errno.ENOENT and "missing" in str(missing.value)
    unreadable = _unique("unreadable")
    await sandbox.write_file(unreadable, b"secret")
    assert (await sandbox.exec(["chmod", "a-r", unreadable])).ok
    with pytest.raises(PermissionError) as denied:
        await sandbox.read_file(unreadable)
    assert denied.value.errno == errno.EACCES and unreadable in str(denied.value)


async def test_read_with_a_size_limit(sandbox: Sandbox) -> None:
    path = _unique("sized.bin")
    await sandbox.write_file(path, b"a" * 2048)
    assert await sandbox.read_file(path, max_bytes=2048) == b"a" * 2048
    with pytest.raises(FileTooLarge) as info:
        await sandbox.read_file(path, max_bytes=1024)
    assert info.value.size == 2048
    # a sparse file far larger than the limit is refused without being read
    big = _unique("sparse.bin")
    assert (await sandbox.exec(["truncate", "-s", "8G", big])).ok
    with anyio.fail_after(20), pytest.raises(FileTooLarge):
        await sandbox.read_file(big, max_bytes=1 << 20)


async def test_launch_failures_are_typed(sandbox: Sandbox) -> None:
    with pytest.raises(PermissionError):
        await sandbox.exec(["/etc/passwd"])  # not executable
    with pytest.raises(PermissionError):
        await sandbox.exec(["/tmp"])  # a folder
    assert (await sandbox.exec(["/no/such/program"])).exit_code == 127
    # a shell reports the same failure as its own exit, which is the command's result
    assert (await sandbox.exec("/etc/passwd")).exit_code == 126


async def test_exec_as_a_user_by_name(sandbox: Sandbox) -> None:
    with pytest.raises(ExecUserError) as unknown:
        await sandbox.exec(["whoami"], user="no-such-user-xyz")
    assert unknown.value.reason == "unknown" and "no-such-user-xyz" in str(unknown.value)
    with pytest.raises(ExecUserError):
        await sandbox.exec(["whoami"], user="nobody:no-such-group-xyz")
    # a sandbox allowed to switch (root, CAP_SETUID/CAP_SETGID, or the engine) runs it as
    # that user with its HOME; one that is not says so, typed, and nothing runs
    try:
        result = await sandbox.exec(["sh", "-c", "whoami; id -u; echo $HOME"], user="nobody")
    except ExecUserError as e:
        assert e.reason == "not_permitted"
    else:
        assert result.stdout.split() == ["nobody", "65534", "/nonexistent"]
