"""``agentenv view --serve``: the site on loopback, built again while the job runs."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agentenv.log import get_logger
from agentenv.view.job import NotAJob
from agentenv.view.site import build_site

log = get_logger(__name__)


_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


class _Site(SimpleHTTPRequestHandler):
    """The site's own files and nothing else: no listing, no link followed (a link planted
    in the site folder could lead anywhere), no request naming another host (a web page
    that rebinds its DNS name to 127.0.0.1 would name its own); no request log."""

    def send_head(self) -> Any:
        host = (self.headers.get("Host") or "127.0.0.1").lower()
        if host.rsplit(":", 1)[0] not in _LOOPBACK and host not in _LOOPBACK:
            self.send_error(HTTPStatus.MISDIRECTED_REQUEST, "served for 127.0.0.1 only")
            return None
        path = self.translate_path(self.path)
        if os.path.isdir(path) and os.path.abspath(path) == os.path.abspath(self.directory):
            path = os.path.join(path, "index.html")  # "/" is the job page
        if os.path.realpath(path) != os.path.abspath(path) or not os.path.isfile(path):
            self.send_error(HTTPStatus.NOT_FOUND, "not a page of the site")
            return None
        return super().send_head()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _stamp(source: Path) -> tuple[tuple[int, int], ...]:
    """What changes when the job writes: its results (an eval's results.jsonl, a refactor's
    report.jsonl), or the one trajectory file."""
    watched = [source / "results.jsonl", source / "report.jsonl"] if source.is_dir() else [source]
    seen = []
    for path in watched:
        try:
            st = path.stat()
        except OSError:
            seen.append((0, 0))
            continue
        seen.append((st.st_mtime_ns, st.st_size))
    return tuple(seen)


def serve(
    source: Path,
    out: Path | None,
    *,
    port: int,
    every_s: float = 5.0,
    ready: Callable[[str], None] = print,
    stop: threading.Event | None = None,
) -> None:
    """Build the site, serve it on 127.0.0.1:``port`` (0: a free one) and tell ``ready``
    its URL; every ``every_s`` build it again if the job wrote since (the job page reloads
    itself as often). Runs until ``stop`` is set or Ctrl-C. Raises
    :class:`~agentenv.view.job.NotAJob` before serving when ``source`` is not a job."""
    index = build_site(source, out, refresh_s=every_s)
    # its real path: a link on the way to it is the user's; the check above is for links in it
    handler = functools.partial(_Site, directory=str(index.parent.resolve()))
    with ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        bound = server.server_address[1]
        ready(f"http://127.0.0.1:{bound}/index.html")
        seen = _stamp(source)
        stop = stop or threading.Event()
        try:
            while not stop.wait(every_s):
                now = _stamp(source)
                if now == seen:
                    continue
                seen = now
                try:
                    build_site(source, out, refresh_s=every_s)
                except (NotAJob, OSError) as e:  # caught mid-write: the next round has it
                    log.info("view.rebuild_failed", error=str(e))
        finally:
            server.shutdown()
