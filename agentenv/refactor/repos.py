"""Repositories on the host, for refactor jobs: the list of repos, their committed state, the
test command, and putting a verified patch back as a branch. Git runs on the host here;
nothing in this module touches a user's working tree or current branch."""

from __future__ import annotations

import ast
import configparser
import json
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

from pydantic import BaseModel, model_validator

from agentenv import scratch

KEYS = ("test", "image", "branch", "name")
FALLBACK_IDENTITY = ("agentenv", "agentenv@localhost")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class RepoError(Exception):
    """A repo that cannot be used as given (not a git repo, unknown branch, …)."""


def slugify(name: str) -> str:
    """``name`` as a safe file name and branch component (``team/x`` → ``team-x``);
    empty when nothing of it is usable."""
    return _UNSAFE.sub("-", name).strip(".-_")[:100]


class RepoEntry(BaseModel):
    """One repo of a job: where it is, and optionally its test command, image and branch (a
    branch, tag or any commit). ``name`` is shown in reports; ``slug``, its safe form, names
    the repo's files in the job folder."""

    path: Path
    name: str
    slug: str = ""
    test: str | None = None
    image: str | None = None
    branch: str | None = None

    @model_validator(mode="after")
    def _slug(self) -> RepoEntry:
        if not self.slug:
            self.slug = slugify(self.name)
        if not self.slug:
            raise ValueError(f"repo name {self.name!r} has no letter or digit to name files by")
        return self


def load_repo_list(spec: Path) -> list[RepoEntry]:
    """Repos from a folder of repos (every subfolder with ``.git``) or from a list file: one
    repo per line, ``PATH [test="make check"] [image=IMG] [branch=B] [name=N]``, paths
    relative to the file, ``#`` comments. Every entry is checked here, before anything runs;
    errors name the file and line. An empty list is an error."""
    if spec.is_dir():
        found = [(p, str(p)) for p in sorted(spec.iterdir()) if (p / ".git").exists()]
        if not found:
            raise RepoError(f"{spec}: no git repositories (folders with .git) in it")
        return _checked([(p.resolve(), {}, where) for p, where in found], spec)
    if not spec.is_file():
        raise RepoError(f"{spec}: no such file or folder")
    rows: list[tuple[Path, dict[str, str], str]] = []
    for number, raw in enumerate(spec.read_text(errors="replace").splitlines(), 1):
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
            if not value.strip():
                raise RepoError(f"{spec}:{number}: {key}= is empty")
            fields[key] = value
        rows.append(((spec.parent / words[0]).resolve(), fields, f"{spec}:{number}"))
    if not rows:
        raise RepoError(
            f"{spec}: lists no repos (one repo folder per line; lines starting with # are comments)"
        )
    return _checked(rows, spec)


def _checked(rows: list[tuple[Path, dict[str, str], str]], spec: Path) -> list[RepoEntry]:
    """Entries for ``rows`` (path, fields, where), refusing names that cannot name files or
    that clash once made safe."""
    entries: list[RepoEntry] = []
    where_of: dict[tuple[str, str], str] = {}
    for path, fields, where in rows:
        name = fields.pop("name", path.name)
        if any(ord(c) < 32 or c == "\x7f" for c in name):
            raise RepoError(f"{where}: the repo name {name!r} holds control characters")
        if not slugify(name):
            raise RepoError(
                f"{where}: the repo name {name!r} has no letter or digit to name its "
                "files by; give name=…"
            )
        entry = RepoEntry(path=path, name=name, **fields)
        for key, other in (("name", entry.name), ("file name", entry.slug)):
            if (key, other) in where_of:
                raise RepoError(
                    f"{where}: repo {name!r} has the same {key} ({other!r}) as the one at "
                    f"{where_of[key, other]}; give each a distinct name=…"
                )
            where_of[key, other] = where
        entries.append(entry)
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


def _git_ok(repo: Path, *args: str) -> str | None:
    """git's output, or ``None`` when it fails (a question, not an error)."""
    try:
        return git(repo, *args).strip()
    except RepoError:
        return None


class Checkout(BaseModel):
    """The committed state a repo's job starts from, cloned for the sandbox."""

    branch: str | None  # the branch it is on; None for a commit, tag or detached HEAD
    commit: str
    dirty: bool  # the user's working tree had uncommitted changes (not taken)
    note: str | None = None  # how the commit was chosen, when that is not the usual way


def clone_committed(entry: RepoEntry, dest: Path) -> Checkout:
    """Clone ``entry``'s commit (its ``branch``: a branch, tag or commit; default: HEAD,
    even detached) with its history into ``dest``: the committed state only, whatever the
    working tree holds."""
    if not entry.path.is_dir():
        raise RepoError(f"{entry.path}: no such folder")
    if _git_ok(entry.path, "rev-parse", "--git-dir") is None:
        raise RepoError(f"{entry.path} is not a git repository")
    note = None
    if entry.branch is not None:
        commit = _git_ok(
            entry.path, "rev-parse", "--verify", "--quiet", f"{entry.branch}^{{commit}}"
        )
        if commit is None:
            raise RepoError(
                f"{entry.path}: branch={entry.branch} is not a branch, tag or commit of this repo"
            )
        is_branch = _git_ok(entry.path, "show-ref", "--verify", f"refs/heads/{entry.branch}")
        branch = entry.branch if is_branch else None
        if branch is None:
            note = f"branch={entry.branch} is not a branch: started from commit {commit[:12]}"
    else:
        commit = _git_ok(entry.path, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        if commit is None:
            raise RepoError(f"{entry.path}: the repository has no commit yet")
        branch = _git_ok(entry.path, "symbolic-ref", "--quiet", "--short", "HEAD")
        if branch is None:
            note = f"HEAD is detached (a CI checkout?): started from its commit {commit[:12]}"
    dirty = bool(git(entry.path, "status", "--porcelain", "--untracked-files=no").strip())
    clone_at(entry.path, dest, commit, branch or "agentenv-base")
    return Checkout(branch=branch, commit=commit, dirty=dirty, note=note)


def clone_at(repo: Path, dest: Path, commit: str, branch: str | None = None) -> None:
    """Clone ``repo`` into the empty folder ``dest`` and check out ``commit``, on a local
    ``branch`` made there if given (else detached). A local clone copies every object, so a
    commit that no ref reaches (a detached CI checkout) is there too."""
    git(repo, "clone", "--quiet", "--no-hardlinks", "--no-checkout", ".", str(dest))
    if _git_ok(dest, "cat-file", "-e", f"{commit}^{{commit}}") is None:
        raise RepoError(f"{repo}: commit {commit[:12]} could not be copied from the repository")
    if branch is None:
        git(dest, "checkout", "--quiet", "--detach", commit)
    else:
        git(dest, "checkout", "--quiet", "-B", branch, commit)


class TestCommand(BaseModel):
    """A detected test command and why it was chosen."""

    command: str
    reason: str


# `python` is absent from images that have only `python3`; for the checker run only, a link
# to python3 goes on the end of PATH (an image that has `python` keeps its own)
PYTHON_SHIM = (
    'mkdir -p /tmp/.agentenv-bin && ln -sf "$(command -v python3)" /tmp/.agentenv-bin/python'
    ' && PATH="$PATH:/tmp/.agentenv-bin" '
)
PYTEST = "python3 -m pytest -q"
_SKIP = {".git", "node_modules", ".venv", "venv", ".tox", ".nox", "build", "dist", "site-packages"}
_PYTHON_WORD = re.compile(r"(?<![\w.-])python(?![\w.-])")


def _has_test_target(makefile: Path) -> bool:
    """Whether the Makefile has a ``test`` target (``test:``, not ``test := …``)."""
    text = makefile.read_text(errors="replace")
    return re.search(r"^test\s*:(?!=)", text, re.MULTILINE) is not None


def _test_files(tree: Path, limit: int = 3) -> list[str]:
    """Up to ``limit`` pytest-style test files under ``tree`` (relative paths), skipping
    virtualenvs, build output and VCS folders."""
    found: list[str] = []

    def walk(folder: Path, depth: int) -> None:
        try:
            children = sorted(folder.iterdir())
        except OSError:
            return
        for child in children:
            if len(found) >= limit:
                return
            if child.is_dir() and not child.is_symlink():
                if depth < 5 and child.name not in _SKIP:
                    walk(child, depth + 1)
            elif child.suffix == ".py" and (
                child.name.startswith("test_") or child.name.endswith("_test.py")
            ):
                found.append(str(child.relative_to(tree)))

    walk(tree, 0)
    return found


def _pytest_args(words: list[str]) -> tuple[list[str], list[str]] | None:
    """The arguments after ``pytest``/``py.test``/``python -m pytest`` in ``words`` (tox's
    placeholders dropped, coverage options too: pytest-cov is not in the image), and what
    was dropped; ``None`` if ``words`` does not run pytest."""
    for i, word in enumerate(words):
        if word in ("pytest", "py.test"):
            rest = words[i + 1 :]
            break
        if word == "-m" and words[i + 1 : i + 2] == ["pytest"]:
            rest = words[i + 2 :]
            break
    else:
        return None
    kept: list[str] = []
    dropped: list[str] = []
    for word in rest:
        word = re.sub(r"\{posargs:?([^}]*)\}", r"\1", word).replace("{toxinidir}", ".")
        if not word:
            continue
        (dropped if word.startswith("--cov") or "{" in word else kept).append(word)
    return kept, dropped


def _ini(path: Path) -> configparser.ConfigParser | None:
    """An INI file (tox.ini, setup.cfg) read as it is, or ``None`` if it does not parse."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read(path)
    except configparser.Error:
        return None
    return parser


def _from_tox(tox: Path) -> tuple[list[str], list[str]] | None:
    parser = _ini(tox)
    if parser is None:
        return None
    for section in parser.sections():
        if section == "testenv" or section.startswith("testenv:"):
            for line in parser.get(section, "commands", fallback="").splitlines():
                try:
                    args = _pytest_args(shlex.split(line.strip().lstrip("-").strip()))
                except ValueError:
                    continue
                if args is not None:
                    return args
    return None


def _from_nox(noxfile: Path) -> tuple[list[str], list[str]] | None:
    try:
        tree = ast.parse(noxfile.read_text(errors="replace"))
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "run"
        ):
            words = []
            for arg in node.args:  # string literals only; *session.posargs and the like end it
                if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                    break
                words.append(arg.value)
            args = _pytest_args(words)
            if args is not None:
                return args
    return None


def _pytest_settings(tree: Path) -> str | None:
    """Which file holds pytest settings, if one does."""
    if (tree / "pytest.ini").is_file():
        return "pytest.ini"
    pyproject = tree / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(errors="replace"))
        except tomllib.TOMLDecodeError:
            data = {}
        if "pytest" in data.get("tool", {}):
            return "pyproject.toml [tool.pytest.ini_options]"
    for name, section in (("setup.cfg", "tool:pytest"), ("tox.ini", "pytest")):
        if (tree / name).is_file():
            parser = _ini(tree / name)
            if parser is not None and parser.has_section(section):
                return f"{name} [{section}]"
    return None


def _src_layout(tree: Path) -> bool:
    src = tree / "src"
    return src.is_dir() and any(
        (child / "__init__.py").is_file() or child.suffix == ".py" for child in src.iterdir()
    )


def detect_test_command(tree: Path) -> TestCommand | None:
    """The usual test command for what ``tree`` holds, and why; ``None`` if none is found.

    Python code is always tested from the checkout, never from a copy the image has
    installed (the base image ships several common packages): ``python3 -m pytest`` puts
    the repo's root first on ``sys.path``, and a ``src/`` layout gets ``PYTHONPATH=$PWD/src``
    (nothing is installed: the image has no pip and the checker runs offline). A Makefile's
    ``test`` target comes first (it is the project's own way); one that calls
    ``python`` gets a ``python`` → ``python3`` link for the run."""
    src = _src_layout(tree)
    prefix = 'PYTHONPATH="$PWD/src" ' if src else ""
    src_why = (
        "; src/ layout: PYTHONPATH=$PWD/src so the checkout is imported, not a copy the image "
        "has installed"
        if src
        else ""
    )
    flat_why = (
        "" if src else "; python3 -m pytest imports the checkout first (its root leads sys.path)"
    )
    makefile = tree / "Makefile"
    if makefile.is_file() and _has_test_target(makefile):
        # the whole Makefile: `PYTHON ?= python` is often set far from the recipe using it
        shim = _PYTHON_WORD.search(makefile.read_text(errors="replace")) is not None
        why = "Makefile has a test target"
        if shim:
            why += "; it calls `python` (the image has python3): a link to python3 is on PATH"
        return TestCommand(
            command=(PYTHON_SHIM if shim else "") + prefix + "make test",
            reason=why + src_why,
        )
    package = tree / "package.json"
    if package.is_file():
        try:
            if json.loads(package.read_text()).get("scripts", {}).get("test"):
                return TestCommand(command="npm test", reason="package.json has a test script")
        except (json.JSONDecodeError, AttributeError):
            pass
    if (tree / "Cargo.toml").is_file():
        return TestCommand(command="cargo test", reason="Cargo.toml")
    if (tree / "go.mod").is_file():
        return TestCommand(command="go test ./...", reason="go.mod")
    for name, derive in (("tox.ini", _from_tox), ("noxfile.py", _from_nox)):
        if (tree / name).is_file() and (found := derive(tree / name)) is not None:
            args, dropped = found
            why = f"the pytest command of {name} (run without {name.split('.')[0]})"
            if dropped:
                why += f"; left out: {' '.join(dropped)}"
            return TestCommand(
                command=prefix + " ".join([PYTEST, *map(shlex.quote, args)]),
                reason=why + src_why + flat_why,
            )
    settings = _pytest_settings(tree)
    if settings is not None:
        return TestCommand(
            command=prefix + PYTEST, reason=f"pytest settings in {settings}" + src_why + flat_why
        )
    tests = _test_files(tree)
    if tests:
        return TestCommand(
            command=prefix + PYTEST,
            reason=f"pytest test files ({', '.join(tests)})" + src_why + flat_why,
        )
    return None


def patch_applies(entry: RepoEntry, commit: str, patch: bytes) -> str | None:
    """``None`` if ``patch`` applies cleanly to ``commit`` of the original repo, else why."""
    with scratch.folder("apply") as tmp:
        return apply_patch(entry, commit, patch, Path(tmp))


def apply_patch(entry: RepoEntry, commit: str, patch: bytes, into: Path) -> str | None:
    """Clone ``commit`` of the original repo into the empty folder ``into`` and apply
    ``patch`` there (index and working tree): ``None``, or why it does not apply. Git's
    ``apply`` runs no hook and reads no config of the patch's making."""
    clone_at(entry.path, into, commit)
    try:
        git(into, "apply", "--index", "--binary", "-", stdin=patch)
    except RepoError as e:
        return str(e)
    return None


def git_identity(repo: Path) -> tuple[str, str, bool]:
    """The name and email git would commit with in ``repo`` (its config, then the user's
    global one), and whether that is ours instead because none is set."""
    name = _git_ok(repo, "config", "user.name")
    email = _git_ok(repo, "config", "user.email")
    if name and email:
        return name, email, False
    return name or FALLBACK_IDENTITY[0], email or FALLBACK_IDENTITY[1], True


class BranchMade(BaseModel):
    """What putting one patch back as a branch did."""

    branch: str
    commit: str
    status: str  # "created", "unchanged" (it already held this change), or "renamed"
    note: str = ""


def ref_format_problem(branch: str) -> str | None:
    """Why ``branch`` cannot be a git branch name, or ``None`` if it can."""
    done = subprocess.run(
        ["git", "check-ref-format", f"refs/heads/{branch}"], capture_output=True, check=False
    )
    return None if done.returncode == 0 else f"{branch!r} is not a valid git branch name"


def create_branch(
    entry: RepoEntry, commit: str, patch: bytes, branch: str, message: str
) -> BranchMade:
    """Make a branch in the original repo holding ``commit`` plus ``patch`` as one commit,
    by the user's git identity. Made in a temporary clone and fetched back, so the user's
    working tree and current branch are not touched, and no existing branch is ever moved:
    if ``branch`` already holds exactly this change (same parent, same tree) nothing is
    done; if it holds anything else, the change goes to ``branch-2`` (``-3``, …) instead."""
    if not entry.path.is_dir():
        raise RepoError(f"{entry.path}: no such folder")
    name, email, fallback = git_identity(entry.path)
    with scratch.folder("branch") as tmp:
        work = Path(tmp)
        clone_at(entry.path, work, commit, "agentenv-apply")
        git(work, "apply", "--index", "--binary", "-", stdin=patch)
        identity = ["-c", f"user.name={name}", "-c", f"user.email={email}"]
        git(work, *identity, "commit", "--quiet", "--no-verify", "-m", message)
        new = git(work, "rev-parse", "HEAD").strip()
        tree = git(work, "rev-parse", "HEAD^{tree}").strip()
        note = (
            f"committed as {name} <{email}> (no git user.name/user.email set)" if fallback else ""
        )
        for n in range(1, 100):
            candidate = branch if n == 1 else f"{branch}-{n}"
            tip = _git_ok(entry.path, "rev-parse", "--verify", "--quiet", f"refs/heads/{candidate}")
            if tip is not None:
                parents = _git_ok(entry.path, "rev-list", "--parents", "-n", "1", tip)
                if parents == f"{tip} {commit}" and (
                    _git_ok(entry.path, "rev-parse", f"{tip}^{{tree}}") == tree
                ):
                    return BranchMade(
                        branch=candidate,
                        commit=tip,
                        status="unchanged",
                        note="it already held this change",
                    )
                continue
            git(
                entry.path,
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                str(work),
                "refs/heads/agentenv-apply",
            )
            # the empty old value makes git refuse if the branch appeared meanwhile
            git(
                entry.path,
                "update-ref",
                "-m",
                "agentenv refactor --apply",
                f"refs/heads/{candidate}",
                new,
                "",
            )
            if n > 1:
                note = "; ".join(
                    filter(
                        None, [f"{branch} already exists with other commits (left as it is)", note]
                    )
                )
            return BranchMade(
                branch=candidate, commit=new, status="created" if n == 1 else "renamed", note=note
            )
    raise RepoError(f"{entry.path}: {branch} and {branch}-2 … {branch}-99 all exist")
