"""``python bench/traced_eval.py eval …``: agentenv's command line, with every sandbox
operation on an episode's verdict path timed (for ``bench/verify_share.py``).

Run with ``PYTHONPATH`` pointing at the agentenv tree to measure (a baseline revision's
checkout, or the working tree); it imports only that tree's agentenv, never ``common``, and
patches what it finds: a name a revision lacks is left alone (its ops then go untimed), so
one wrapper serves revisions whose internals differ. ``$AGENTENV_TRACE`` names the JSON
file written at exit: one record per episode (the task, when ``finish`` and ``verify_final``
started and ended, and each outermost sandbox operation in them with its kind, seconds,
the command's own seconds as the executor measured them, and bytes uploaded).

The timing costs a ``perf_counter`` pair per operation; nothing else changes.
"""

from __future__ import annotations

import atexit
import contextvars
import functools
import importlib
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

_record: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "_record", default=None
)
_inside: contextvars.ContextVar[bool] = contextvars.ContextVar("_inside", default=False)
EPISODES: list[dict[str, Any]] = []
_by_task: dict[int, dict[str, Any]] = {}  # the async task concluding an episode → its record


def _current_task() -> int:
    import asyncio

    task = asyncio.current_task()
    return id(task) if task is not None else 0


def _words(cmd: Any) -> str:
    return " ".join(cmd) if isinstance(cmd, list) else str(cmd)


def exec_kind(cmd: Any, user: str | None) -> str:
    """What an exec on the verdict path is for, from its command line."""
    text = _words(cmd)
    known = (
        ("stop_agent.py", "exec: stop_agent"),
        ("read_capped.py", "exec: read_capped (json/file)"),
        ("call_function.py", "exec: call_function (outputs)"),
        ("run_pytest.py", "exec: run_pytest"),
        ("png_check.py", "exec: png_check (image)"),
        ("/agentenv/inputs-", "exec: outputs inputs folder"),
    )
    for needle, kind in known:
        if needle in text:
            return kind
    if text.startswith("mkdir -p /agentenv") or "chmod 0700 /agentenv" in text:
        return "exec: lay out /agentenv"
    if "-exec rm -rf" in text and "chown" in text:
        return "exec: empty workdir, /tmp"
    return "exec: the check's own (as agent)" if user else "exec: the check's own"


KEEP_CLEAN = frozenset({"exec: stop_agent", "exec: lay out /agentenv", "exec: empty workdir, /tmp"})
"""Execs (root's own, starting nothing as the agent's user) after which no process of the
agent's user can exist that did not before."""


READ_ONLY = frozenset({"exec: read_capped (json/file)", "exec: png_check (image)"})
"""Execs that run nothing of the agent's and change nothing in the sandbox."""


def interpreter_starts(cmd: Any) -> int:
    """Python interpreters an exec starts directly (a script's own are not seen)."""
    text = _words(cmd)
    return 1 if text.startswith("python3") or " python3 " in f" {text}" else 0


def _add(kind: str, started: float, **extra: Any) -> None:
    record = _record.get()
    if record is None:
        return
    seconds = time.perf_counter() - started
    record["ops"].append({"phase": record.get("now"), "kind": kind, "s": seconds, **extra})


def _timed(kind: str | Callable[..., str]) -> Callable[[Any], Any]:
    """Wrap an async function: its outermost calls on a verdict path are recorded."""

    def wrap(fn: Any) -> Any:
        @functools.wraps(fn)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            if _record.get() is None or _inside.get():
                return await fn(*args, **kwargs)
            token = _inside.set(True)
            started = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                _inside.reset(token)
                _add(kind(*args, **kwargs) if callable(kind) else kind, started)

        return timed

    return wrap


def _patch_sandbox(cls: Any) -> None:
    exec_ = cls.exec

    @functools.wraps(exec_)
    async def exec_timed(self: Any, cmd: Any, **kwargs: Any) -> Any:
        kind = exec_kind(cmd, kwargs.get("user"))
        if kind not in KEEP_CLEAN:
            self._bench_clean = False  # for the what-if "dedupe-stop"
        if kind not in KEEP_CLEAN | READ_ONLY:
            self._bench_ws_dirty = True  # for the what-if "dedupe-reset"
        elif kind == "exec: lay out /agentenv":
            self._bench_ws_dirty = False
        if _record.get() is None or _inside.get():
            return await exec_(self, cmd, **kwargs)
        token = _inside.set(True)
        started = time.perf_counter()
        result = None
        try:
            result = await exec_(self, cmd, **kwargs)
            return result
        finally:
            _inside.reset(token)
            _add(
                exec_kind(cmd, kwargs.get("user")),
                started,
                cmd_s=getattr(result, "duration_s", None),
                python=interpreter_starts(cmd),
            )

    cls.exec = exec_timed
    upload = cls.upload_tar

    @functools.wraps(upload)
    async def upload_timed(self: Any, data: Any, dest: str) -> Any:
        if _record.get() is None or _inside.get():
            return await upload(self, data, dest)
        size = len(data) if isinstance(data, bytes | bytearray) else _size(data)
        where = "/agentenv" if dest.rstrip("/") == "/agentenv" else dest
        if dest.startswith("/agentenv/") and dest != "/agentenv":
            where = "/agentenv/…"
        kind = f"upload: {'workspace' if where == self.spec.workdir else where}"
        token = _inside.set(True)
        started = time.perf_counter()
        try:
            return await upload(self, data, dest)
        finally:
            _inside.reset(token)
            _add(kind, started, bytes=size)

    cls.upload_tar = upload_timed
    for name, kind in (
        ("pause", "pause"),
        ("resume", "resume"),
        ("close", "close (remove)"),
        ("download_to", "download the workdir"),
        ("snapshot", "snapshot"),
    ):
        if hasattr(cls, name):
            setattr(cls, name, _timed(kind)(getattr(cls, name)))


def _size(path: Any) -> int | None:
    try:
        return os.path.getsize(path)
    except (OSError, TypeError):
        return None


def _patch_episode(episode: Any) -> None:
    """Time ``finish`` and ``verify_final`` (looked up as module globals by the episode's
    conclusion) and the checker's creation and hand-back in them."""
    for name in ("finish", "verify_final"):
        original = getattr(episode, name, None)
        if original is not None:
            setattr(episode, name, _phase(name, original))
    handing = getattr(getattr(episode, "Episode", None), "_hand_back", None)
    if handing is not None:  # off the verdict's path (alongside it, or after it)
        episode.Episode._hand_back = staticmethod(_untimed(handing))
    if hasattr(episode, "reuse_or_create"):
        episode.reuse_or_create = _timed("create checker (not ahead)")(episode.reuse_or_create)
    ahead = getattr(episode, "CheckerAhead", None)
    if ahead is not None and hasattr(ahead, "take"):
        ahead.take = _timed("take checker made ahead (thaw)")(ahead.take)
    try:  # the module: the package exports a function of the same name
        recycling: Any = importlib.import_module("agentenv.sandbox.recycling")
    except ImportError:
        return
    if hasattr(recycling, "hand_back"):  # handed_back() calls it as a module global
        recycling.hand_back = _timed("hand back checker (recycle or remove)")(recycling.hand_back)


def _untimed(fn: Any) -> Any:
    """``fn`` with nothing in it recorded: a task started from a verdict path inherits its
    record, but runs beside it."""

    @functools.wraps(fn)
    async def untimed(*args: Any, **kwargs: Any) -> Any:
        token = _record.set(None)
        try:
            return await fn(*args, **kwargs)
        finally:
            _record.reset(token)

    return untimed


def _phase(name: str, fn: Any) -> Any:
    @functools.wraps(fn)
    async def phase(*args: Any, **kwargs: Any) -> Any:
        key = _current_task()
        record = _by_task.get(key) if name == "verify_final" else None
        if record is None:
            at = 1 if name == "finish" else 0
            prepared = args[at] if len(args) > at else kwargs.get("prepared")
            task = getattr(getattr(prepared, "task", None), "id", "?")
            record = {"task": task, "ops": []}
            _by_task[key] = record
            EPISODES.append(record)
        record[f"{name}_start"] = time.time()
        record["now"] = name
        token = _record.set(record)
        try:
            return await fn(*args, **kwargs)
        finally:
            _record.reset(token)
            record[f"{name}_end"] = time.time()
            if name == "verify_final":
                _by_task.pop(key, None)

    return phase


def what_if(names: set[str]) -> None:
    """Changes measured without making them (``$AGENTENV_BENCH_WHATIF``, comma-separated):
    ``shares=N`` gives checker sandboxes that CPU weight; ``dedupe-stop`` skips a
    ``stop_agent`` when nothing could have started a process of the agent's user since the
    last one succeeded (only root's own layout commands ran). ``dedupe-stop``,
    ``dedupe-reset`` and ``hand-back-later`` are agentenv's own since issue 30 (``Run``'s
    watcher, ``Episode.conclude``): on a tree that has them they change nothing more."""
    from agentenv.runner import episode

    for name in names:
        if name.startswith("shares=") and hasattr(episode, "CHECKER_CPU_SHARES"):
            episode.CHECKER_CPU_SHARES = int(name.partition("=")[2])
    if "dedupe-stop" in names:
        from agentenv.verify.base import Run

        stop = Run.stop_agent

        @functools.wraps(stop)
        async def stop_once(self: Any) -> None:
            if getattr(self.sandbox, "_bench_clean", False):
                return
            await stop(self)
            self.sandbox._bench_clean = True

        Run.stop_agent = stop_once  # type: ignore[method-assign]
    if "hand-back-later" in names:
        _hand_back_later()
    if "dedupe-reset" in names:
        _dedupe_reset()
    if "reap-fast" in names:
        _reap_fast()


SLOW_REAP = "time.sleep(min(left, 0.002))"
FAST_REAP = "time.sleep(min(left, 0.0001))"


def _reap_fast() -> None:
    """call_function.py as laid out polls for a case's exit every 0.1 ms, not every 2 ms."""
    import io
    import tarfile

    run: Any = importlib.import_module("agentenv.verify.run")
    files = getattr(run, "_checker_files", None)
    if files is None:
        return

    @functools.wraps(files)
    def reaping_fast(*args: Any, **kwargs: Any) -> bytes:
        data: bytes = files(*args, **kwargs)
        out = io.BytesIO()
        with (
            tarfile.open(fileobj=io.BytesIO(data)) as src,
            tarfile.open(fileobj=out, mode="w") as dst,
        ):
            for member in src:
                body = src.extractfile(member) if member.isfile() else None
                content = body.read() if body is not None else None
                if member.name.endswith("/call_function.py") and content is not None:
                    content = content.replace(SLOW_REAP.encode(), FAST_REAP.encode())
                    member.size = len(content)
                dst.addfile(member, io.BytesIO(content) if content is not None else None)
        return out.getvalue()

    run._checker_files = reaping_fast


def _dedupe_reset() -> None:
    """No stop and fresh workspace before a leaf check when nothing has run since the
    workspace was laid down but root's layout and read-only checkers (file, json, image)."""
    from agentenv.verify.base import Run

    before = Run.before_leaf

    @functools.wraps(before)
    async def before_if_needed(self: Any) -> None:
        if self.leaves >= 1 and getattr(self.sandbox, "_bench_ws_dirty", True) is False:
            self.leaves += 1
            return
        await before(self)
        if self.leaves > 1:
            self.sandbox._bench_ws_dirty = False

    Run.before_leaf = before_if_needed  # type: ignore[method-assign]


_LATER: set[Any] = set()


def _hand_back_later() -> None:
    import asyncio

    recycling: Any = importlib.import_module("agentenv.sandbox.recycling")
    hand_back = recycling.hand_back

    @functools.wraps(hand_back)
    async def later(*args: Any, **kwargs: Any) -> None:
        record = _record.get()
        if record is None or record.get("now") != "verify_final":
            await hand_back(*args, **kwargs)
            return
        token = _record.set(None)  # off the verdict path: not timed as on it
        try:
            task = asyncio.get_running_loop().create_task(hand_back(*args, **kwargs))
        finally:
            _record.reset(token)
        _LATER.add(task)  # a box still being handed back when the job ends: swept by label
        task.add_done_callback(_LATER.discard)

    recycling.hand_back = later


def _write() -> None:
    path = os.environ.get("AGENTENV_TRACE")
    if path:
        with open(path, "w") as f:
            json.dump({"episodes": EPISODES}, f)


def install() -> None:
    """Patch what this revision has."""
    from agentenv.runner import episode

    _patch_episode(episode)
    try:
        from agentenv.sandbox.container.sandbox import ContainerSandbox
    except ImportError:
        return
    _patch_sandbox(ContainerSandbox)


def main() -> None:
    """agentenv's command line with the verdict path timed."""
    install()
    what_if(
        {w.strip() for w in os.environ.get("AGENTENV_BENCH_WHATIF", "").split(",") if w.strip()}
    )
    atexit.register(_write)
    from agentenv.cli import main as cli

    sys.argv[0] = "agentenv"
    cli()


if __name__ == "__main__":
    main()
