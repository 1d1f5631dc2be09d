"""``agentenv view --serve``: the site on loopback, built again while the job runs."""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agentenv.log import get_logger
from agentenv.view.pages import CSP
from agentenv.view.site import build_site

log = get_logger(__name__)


_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
# what a build writes (and nothing else that may lie in the folder)
_SITE_FILES = re.compile(
    r"index\.html|assets/view\.(css|js)|episodes/[^/]+\.html|charts/[^/]+\.svg"
)


class _Site(SimpleHTTPRequestHandler):
    """The site's own files and nothing else: no listing, no link followed (a link planted
    in the site folder could lead anywhere), no request naming another host (a web page
    that rebinds its DNS name to 127.0.0.1 would name its own); no request log."""

    def send_head(self) -> Any:
        host = (self.headers.get("Host") or "127.0.0.1").lower()
        if host.rsplit(":", 1)[0] not in _LOOPBACK and host not in _LOOPBACK:
            self.send_error(HTTPStatus.MISDIRECTED_REQUEST, "served for 127.0.0.1 only")
            return None
        try:
            path = self.translate_path(self.path)
            if os.path.isdir(path) and os.path.abspath(path) == os.path.abspath(self.directory):
                path = os.path.join(path, "index.html")  # "/" is the job page
            relative = os.path.relpath(path, self.directory)
            ours = _SITE_FILES.fullmatch(relative) is not None
            real = os.path.realpath(path) == os.path.abspath(path) and os.path.isfile(path)
        except (ValueError, OSError):  # a NUL, a name that is not UTF-8
            ours = real = False
        if not (ours and real):
            self.send_error(HTTPStatus.NOT_FOUND, "not a page of the site")
            return None
        return super().send_head()

    def end_headers(self) -> None:
        # the pages say it too; a file the job planted under a served name would not
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()

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
    made: dict[str, str] = {}  # what this server built: pages made again only on a change
    index = build_site(source, out, refresh_s=every_s, made=made)
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
                    build_site(source, out, refresh_s=every_s, made=made)
                except Exception as e:  # mid-write, or a bad line: the site served stays
                    log.warning("view.rebuild_failed", error=f"{type(e).__name__}: {e}")
        finally:
            server.shutdown()
