"""Real Harbor tasks, as their authors ship them, run by ``agentenv eval`` with the oracle and
the null model: the table of what each scores, or the error or refusal that stops it.

The tasks are not in this repository (their licences vary; some are large): each is named by
its public repository, commit and folder (:data:`TASKS`), exported from a local git copy of
that repository (``--repos``: a folder of clones, ``<owner>/<name>`` or ``<owner>+<name>``,
each a work tree or a bare/mirror git directory, e.g. ``git clone --mirror
https://github.com/<owner>/<name> <repos>/<owner>/<name>``) into ``--work``. A Dockerfile's
``FROM`` naming an image this engine does not have is rewritten to ``--base`` (agentenv's
offline base image by default; this host has no registry), and the table says so per task:
the task then runs on another system than its author's, and a build step that downloads
(``apt-get``, ``pip``) fails as a build with no network does.

    python bench/harbor_real.py --repos /work/.mirror --work /tmp/harbor-real

prints, per task: its source (repo@commit), whether FROM was rewritten, and for the oracle
and the null model the reward, or the outcome (``refused``, ``task_error``,
``verifier_error``, ...) with the first line of its reason. The two jobs stay in
``--work/oracle`` and ``--work/null`` (``agentenv view`` reads them); running the script
again resumes them (``--fresh`` starts over).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

BASE = "agentenv/base:bookworm"


@dataclass(frozen=True)
class Source:
    """One task folder in a public repository at a commit."""

    repo: str  # owner/name on GitHub
    commit: str
    path: str  # the task's folder in the repository

    @property
    def name(self) -> str:
        """The folder name it gets in the work folder (the task id, unless task.toml names
        one)."""
        return self.path.rstrip("/").rsplit("/", 1)[-1]


COOKBOOK = "harbor-framework/harbor-cookbook", "e093c9a860b988d9d74901010ddddb9c7f124f92"
PURPLE = "purple29th/purple29th-tbench-2", "20b8213075732fabbc45b8cdfdcdd9da55a69b16"
JOHNBUCK = "johnbuck/harbor-tasks", "5d19809ec4a782a069f890c13f4ef4f1789c2bb4"
BENCALVERT = "bencalvert04/harbor-tasks", "4c7a1f04fd97a1ad15f34e747df5d4a9b0983d78"
TERMIGEN = "zjysteven/terminal-bench-env", "aaad6aeff9b58ab7504a7d239f01f8b11c7174ef"

TASKS: tuple[Source, ...] = (
    *(
        Source(*COOKBOOK, f"harbor_cookbook/recipes/{recipe}")
        for recipe in (
            "simple-task",
            "multi-reward",
            "skills",
            "multi-step",
            "mcp-tools",
            "multi-container",
            "dns-blacklisting",
            "simulated-user",
            "computer-use-ubuntu",
            "computer-use-windows",
        )
    ),
    *(
        Source(*PURPLE, path)
        for path in (
            "hello-world",
            "billet-hydrogen-pore-true-pressure",
            "event-loop-scheduler",
            "android-okhttp-disk-cache",
        )
    ),
    *(
        Source(*JOHNBUCK, f"tasks/{path}")
        for path in (
            "code-editing/fix-bug-with-failing-test-01",
            "building-prototypes/cli-tool-01",
            "compliance-security/secret-scan-01",
            "building-prototypes/multistep-scaffold-implement-document-01",
        )
    ),
    *(Source(*BENCALVERT, path) for path in ("ssh-key-pair", "scheduler")),
    *(
        Source(*TERMIGEN, f"environments_harbor/{path}")
        for path in ("articulation_points_bridges_medium", "dead_letter_queue_handling_medium")
    ),
)
"""About twenty tasks agentenv's authors did not write: Harbor's own cookbook recipes (one per
feature), and Terminal-Bench-style tasks from public task sets (Python, C, Java images;
internet in their builds and tests; steps; compose; no solution)."""


def git_dir(repos: Path, repo: str) -> Path:
    """The local git copy of ``repo`` (owner/name) under ``repos``."""
    owner, name = repo.split("/")
    for candidate in (repos / f"{owner}+{name}" / "repo", repos / f"{owner}+{name}",
                      repos / owner / name):  # fmt: skip
        if candidate.is_dir():
            return candidate
    raise SystemExit(f"no copy of {repo} under {repos}: git clone https://github.com/{repo}")


def export(source: Source, repos: Path, into: Path) -> None:
    """Write the task's folder at its commit into ``into`` (as ``git archive`` gives it)."""
    data = subprocess.run(
        ["git", "--git-dir" if (git_dir(repos, source.repo) / "HEAD").is_file() else "-C",
         str(git_dir(repos, source.repo)), "archive", "--format=tar", source.commit,
         source.path],
        check=True, capture_output=True,
    ).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into / "_export", filter="data")
    shutil.move(into / "_export" / source.path, into / source.name)
    shutil.rmtree(into / "_export")


def local_images() -> set[str]:
    """The images this engine has, as ``repo:tag``."""
    out = subprocess.run(
        ["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return set(out.split())


FROM = re.compile(r"^(\s*FROM\s+)(?:--platform=\S+\s+)?(\S+)(.*)$", re.I | re.M)


def rewrite_from(folder: Path, have: set[str], base: str) -> list[str]:
    """Point every ``FROM`` of the task's Dockerfiles that names an image this engine lacks at
    ``base`` (a stage name of a multi-stage build is kept); the images replaced."""
    replaced: list[str] = []
    for dockerfile in sorted(folder.rglob("Dockerfile*")):
        text = dockerfile.read_text()
        stages = {m.group(3).split()[-1].lower() for m in FROM.finditer(text) if " as " in
                  m.group(3).lower()}  # fmt: skip

        def swap(m: re.Match[str], stages: set[str] = stages) -> str:
            image = m.group(2)
            if image.lower() in stages or image in have or f"{image}:latest" in have:
                return m.group(0)
            replaced.append(image)
            return f"{m.group(1)}{base}{m.group(3)}"

        dockerfile.write_text(FROM.sub(swap, text))
    return replaced


def run_eval(work: Path, model: str, concurrency: int) -> int:
    """``agentenv eval`` over the work folder's tasks with ``model``; its exit code."""
    cmd = [sys.executable, "-m", "agentenv", "eval", str(work / "tasks"), "--model", model,
           "--out", str(work / model), "-c", str(concurrency), "--attempts", "1"]  # fmt: skip
    print("$", " ".join(cmd), flush=True)
    return subprocess.run(cmd, env={**os.environ, "COLUMNS": "200"}).returncode


def verdicts(job: Path) -> dict[str, str]:
    """Each task's verdict in the job: its reward, or its outcome and first reason."""
    found: dict[str, str] = {}
    path = job / "results.jsonl"
    if not path.exists():
        return found
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r["outcome"] == "graded":
            found[r["task_id"]] = f"{r['reward']:.2f}"
        else:
            why = (r.get("error") or "").strip().splitlines()
            found[r["task_id"]] = f"{r['outcome']}: {why[0][:150] if why else ''}"
    return found


def task_ids(tasks: Path) -> dict[str, str]:
    """Folder name → the task id agentenv gives it (a Harbor 1.1 ``[task] name`` wins)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from agentenv.formats import load_runnable

    loaded = load_runnable([tasks])
    ids = {t.folder.name: t.id for t in loaded.tasks if t.folder is not None}
    return {**ids, **{r.folder.name: r.id for r in loaded.refused}}


def main() -> None:
    """Export the tasks, run the oracle and the null model over them, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repos", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/harbor-real"))
    parser.add_argument("--base", default=BASE)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--fresh", action="store_true", help="start over")
    parser.add_argument("--table-only", action="store_true", help="print the table; run nothing")
    args = parser.parse_args()
    work: Path = args.work
    if args.fresh and work.exists():
        shutil.rmtree(work)
    tasks = work / "tasks"
    rewritten: dict[str, list[str]] = {}
    notes = work / "rewritten.json"
    if not tasks.exists():
        tasks.mkdir(parents=True)
        have = local_images()
        for source in TASKS:
            export(source, args.repos, tasks)
            rewritten[source.name] = rewrite_from(tasks / source.name, have, args.base)
        notes.write_text(json.dumps(rewritten, indent=1))
    rewritten = json.loads(notes.read_text())
    if not args.table_only:
        for model in ("oracle", "null"):
            run_eval(work, model, args.concurrency)
    ids = task_ids(tasks)
    oracle, null = verdicts(work / "oracle"), verdicts(work / "null")
    print("\n| task | source | FROM rewritten | oracle | null |\n|---|---|---|---|---|")
    for source in TASKS:
        task_id = ids.get(source.name, source.name)
        images = ", ".join(rewritten.get(source.name, [])) or "no"
        where = f"{source.repo}@{source.commit[:7]}:{source.path}"
        cells = (source.name, where, images, oracle.get(task_id, "—"), null.get(task_id, "—"))
        print("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")


if __name__ == "__main__":
    main()
