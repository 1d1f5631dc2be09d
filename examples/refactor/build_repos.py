"""Build a handful of small, real git repositories for trying `agentenv refactor` offline.

Every repo uses (or not) an old helper, `http_util.fetch_json`, which the team wants renamed
to `get_json` everywhere. The four repos cover the outcomes a job reports:

- billing    the rename is clean: tests stay green            → changed-green
- reports    a plugin looks the helper up by a built string   → changed-red
- legacy     its tests already fail before anything changes   → baseline-red
- docs-site  never used the helper                           → no-change

Usage: python3 examples/refactor/build_repos.py DEST
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

HTTP_UTIL = '''\
"""Tiny HTTP helpers (offline: answers come from a table)."""

FAKE = {"/invoices": [{"id": 1, "total": 120}, {"id": 2, "total": 80}]}


def fetch_json(path):
    """The JSON document at path."""
    return FAKE[path]
'''

REPOS: dict[str, dict[str, str]] = {
    "billing": {
        "http_util.py": HTTP_UTIL,
        "billing.py": """\
from http_util import fetch_json


def outstanding():
    return sum(inv["total"] for inv in fetch_json("/invoices"))
""",
        "test_billing.py": """\
import billing


def test_outstanding():
    assert billing.outstanding() == 200
""",
    },
    "reports": {
        "http_util.py": HTTP_UTIL,
        "reports.py": """\
import http_util

# plugins name the helper they need; this one predates the rename
LOADER = "fetch_" + "json"


def invoice_count():
    return len(getattr(http_util, LOADER)("/invoices"))
""",
        "test_reports.py": """\
import reports


def test_invoice_count():
    assert reports.invoice_count() == 2
""",
    },
    "legacy": {
        "http_util.py": HTTP_UTIL,
        "legacy.py": """\
from http_util import fetch_json


def biggest():
    return min(inv["total"] for inv in fetch_json("/invoices"))  # a known bug
""",
        "test_legacy.py": """\
import legacy


def test_biggest():
    assert legacy.biggest() == 120
""",
    },
    "docs-site": {
        "pages.py": """\
def title(page):
    return page.replace("-", " ").title()
""",
        "test_pages.py": """\
import pages


def test_title():
    assert pages.title("getting-started") == "Getting Started"
""",
    },
}

GIT = ["git", "-c", "user.name=Example Dev", "-c", "user.email=dev@example.com"]


def _runner(repo: Path) -> Callable[..., object]:
    def run(*args: str) -> object:
        return subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True)

    return run


def build(dest: Path) -> list[Path]:
    """Create the repos under ``dest`` (which must not hold them yet); return their paths."""
    made = []
    for name, files in REPOS.items():
        repo = dest / name
        repo.mkdir(parents=True)
        run = _runner(repo)
        run("init", "--quiet", "--initial-branch=main")
        (repo / "README.md").write_text(f"# {name}\n")
        (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
        run("add", "-A")
        run("commit", "--quiet", "-m", "Start the project")
        for path, text in files.items():
            (repo / path).write_text(textwrap.dedent(text))
        run("add", "-A")
        run("commit", "--quiet", "-m", f"Add {name}")
        made.append(repo)
    return made


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for path in build(Path(sys.argv[1])):
        print(path)
