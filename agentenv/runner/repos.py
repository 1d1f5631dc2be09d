"""Repositories on the host, for refactor jobs: the list of repos, their committed state, the
test command, and putting a verified patch back as a branch. Git runs on the host here;
nothing in this module touches a user's working tree or current branch."""

from __future__ import annotations

import json
import shlex
import subprocess
import tempfile
from pathlib import Path

from pydantic import BaseModel

KEYS = ("test", "image", "branch", "name")
IDENTITY = ["-c", "user.name=agentenv", "-c", "user.email=agentenv@localhost"]


class RepoError(Exception):
    """A repo that cannot be used as given (not a git repo, unknown branch, …)."""


class RepoEntry(BaseModel):
    """One repo of a job: where it is, and optionally its test command, image and branch."""

    path: Path
    name: str
    test: str | None = None
    image: str | None = None
    branch: str | None = None


def load_repo_list(spec: Path) -> list[RepoEntry]:
    """Repos from a folder of repos (every subfolder with ``.git``) or from a list file: one
    repo per line, ``PATH [test="make check"] [image=IMG] [branch=B] [name=N]``, paths
    relative to the file, ``#`` comments. Errors name the file and line."""
    if spec.is_dir():
        entries = [
            RepoEntry(path=p.resolve(), name=p.name)
            for p in sorted(spec.iterdir())
            if (p / ".git").exists()
        ]
        if not entries:
            raise RepoError(f"{spec}: no git repositories (folders with .git) in it")
        return entries
    if not spec.is_file():
        raise RepoError(f"{spec}: no such file or folder")
    entries = []
    for number, raw in enumerate(spec.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        try:
            words = shlex.split(line)
        except ValueError as e:
            raise RepoError(f"{spec}:{number}: {e}") from e
        fields: dict[str, str] = {}
        for word in words[1:]:
            key, eq, value = word.partition("=")
            if not eq or key not in KEYS:
                raise RepoError(
                    f"{spec}:{number}: {word!r} is not one of {', '.join(k + '=…' for k in KEYS)}"
                )
            fields[key] = value
        path = (spec.parent / words[0]).resolve()
        entries.append(RepoEntry(path=path, name=fields.pop("name", path.name), **fields))
    names = [e.name for e in entries]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise RepoError(f"{spec}: repo names must be unique (give name=…): {', '.join(twice)}")
    return entries


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    """Run git in ``repo``; raises :class:`RepoError` with git's message on failure."""
    done = subprocess.run(
        ["git", "-C", str(repo), *args], input=stdin, capture_output=True, check=False
    )
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip() or f"exit {done.returncode}"
        raise RepoError(f"git {' '.join(args[:2])} in {repo}: {message}")
    return done.stdout.decode(errors="replace")


class Checkout(BaseModel):
    """The committed state of a repo's branch, cloned for the sandbox."""

    branch: str
    commit: str
    dirty: bool  # the user's working tree had uncommitted changes (not taken)


def clone_committed(entry: RepoEntry, dest: Path) -> Checkout:
    """Clone ``entry``'s branch (default: the checked-out one) with its history into
    ``dest``: the committed state only, whatever the working tree holds."""
    if not entry.path.is_dir():
        raise RepoError(f"{entry.path}: no such folder")
    try:
        git(entry.path, "rev-parse", "--git-dir")
    except RepoError as e:
        raise RepoError(f"{entry.path} is not a git repository") from e
    branch = entry.branch or git(entry.path, "symbolic-ref", "--short", "HEAD").strip()
    commit = git(entry.path, "rev-parse", "--verify", f"{branch}^{{commit}}").strip()
    dirty = bool(git(entry.path, "status", "--porcelain", "--untracked-files=no").strip())
    git(entry.path, "clone", "--quiet", "--no-hardlinks", "--branch", branch, ".", str(dest))
    return Checkout(branch=branch, commit=commit, dirty=dirty)


def detect_test_command(tree: Path) -> str | None:
    """The usual test command for what ``tree`` holds, or ``None``."""
    makefile = tree / "Makefile"
    if makefile.is_file() and any(
        line.startswith("test:") for line in makefile.read_text(errors="replace").splitlines()
    ):
        return "make test"
    package = tree / "package.json"
    if package.is_file():
        try:
            if json.loads(package.read_text()).get("scripts", {}).get("test"):
                return "npm test"
        except (json.JSONDecodeError, AttributeError):
            pass
    if (tree / "Cargo.toml").is_file():
        return "cargo test"
    if (tree / "go.mod").is_file():
        return "go test ./..."
    python_tests = list(tree.glob("test_*.py")) + list(tree.glob("tests/test_*.py"))
    if python_tests or (tree / "pytest.ini").is_file():
        return "python3 -m pytest -q"
    return None


def patch_applies(entry: RepoEntry, commit: str, patch: bytes) -> str | None:
    """``None`` if ``patch`` applies cleanly to ``commit`` of the original repo, else why."""
    with tempfile.TemporaryDirectory(prefix="agentenv-apply-") as tmp:
        return apply_patch(entry, commit, patch, Path(tmp))


def apply_patch(entry: RepoEntry, commit: str, patch: bytes, into: Path) -> str | None:
    """Clone ``commit`` of the original repo into the empty folder ``into`` and apply
    ``patch`` there (index and working tree): ``None``, or why it does not apply. Git's
    ``apply`` runs no hook and reads no config of the patch's making."""
    git(entry.path, "clone", "--quiet", "--no-hardlinks", "--no-checkout", ".", str(into))
    git(into, "checkout", "--quiet", commit)
    try:
        git(into, "apply", "--index", "--binary", "-", stdin=patch)
    except RepoError as e:
        return str(e)
    return None


def create_branch(entry: RepoEntry, commit: str, patch: bytes, branch: str, message: str) -> str:
    """Make ``branch`` in the original repo: ``commit`` plus ``patch`` as one commit. Done in
    a temporary clone and pushed back, so the user's working tree and current branch are not
    touched. Returns the new commit."""
    with tempfile.TemporaryDirectory(prefix="agentenv-branch-") as tmp:
        work = Path(tmp)
        git(entry.path, "clone", "--quiet", "--no-hardlinks", "--no-checkout", ".", tmp)
        git(work, "checkout", "--quiet", "-b", branch, commit)
        git(work, "apply", "--index", "--binary", "-", stdin=patch)
        git(work, *IDENTITY, "commit", "--quiet", "--no-verify", "-m", message)
        new = git(work, "rev-parse", "HEAD").strip()
        git(work, "push", "--quiet", "--force", "origin", f"{branch}:refs/heads/{branch}")
    return new
