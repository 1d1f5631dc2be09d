"""Agent Skills named to the model, as Harbor's agents name them (its ``skills_dir``).

A skills folder in the sandbox holds one folder per skill, each with a ``SKILL.md`` that
opens with YAML front matter giving its ``name`` and ``description``. At episode start the
folder is read through the engine (an archive of it, never a program in the sandbox: the
image may ship its own ``find`` or ``cat``), and an ``<available_skills>`` block listing
each skill with the path of its ``SKILL.md`` goes after the instruction, so the model can
read a skill when it wants it (the Agent Skills way: the body is not put in the prompt).
A ``SKILL.md`` whose front matter is missing or wrong is left out with a log line.
"""

from __future__ import annotations

import posixpath
import re
import tarfile
from pathlib import Path
from xml.etree.ElementTree import Element, SubElement, indent, tostring

import yaml
from pydantic import BaseModel

from agentenv import scratch
from agentenv.errors import SandboxError
from agentenv.log import get_logger
from agentenv.sandbox.protocol import Sandbox

log = get_logger(__name__)

MAX_ARCHIVE = 64 << 20
"""Bytes of the skills folder's archive read at most: skills are text, a bigger folder is
a mistake (or a trap) and gets no block rather than a stalled episode."""

MAX_SKILL_MD = 1 << 20
"""A ``SKILL.md`` bigger than this is skipped (only its front matter is used)."""

_FRONT_MATTER = re.compile(r"\A---\r?\n(.*?)\r?\n---", re.DOTALL)


class Skill(BaseModel):
    """One skill as the model is told of it."""

    name: str
    description: str
    location: str  # its SKILL.md's absolute path in the sandbox


def front_matter(text: str) -> tuple[str, str] | None:
    """``(name, description)`` from a ``SKILL.md``'s YAML front matter; ``None`` when it has
    none, it is not YAML, or it lacks either key."""
    match = _FRONT_MATTER.match(text)
    if match is None:
        return None
    try:
        fields = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return None
    if not isinstance(fields, dict):
        return None
    name, description = fields.get("name"), fields.get("description")
    if name in (None, "") or description in (None, ""):
        return None
    return str(name), str(description)


def skills_in(archive: tarfile.TarFile, skills_dir: str) -> list[Skill]:
    """The skills of ``archive`` (the engine's archive of ``skills_dir``, under the folder's
    own name): each ``<skill>/SKILL.md`` directly below it that is a regular file with good
    front matter, by path."""
    base = skills_dir.rstrip("/") or "/"
    found: list[Skill] = []
    for member in sorted(archive.getmembers(), key=lambda m: m.name):
        parts = member.name.strip("/").split("/")
        # <folder>/<skill>/SKILL.md: as `find -mindepth 2 -maxdepth 2 -name SKILL.md -type f`
        if len(parts) != 3 or parts[2] != "SKILL.md" or not member.isfile():
            continue
        location = posixpath.join(base, parts[1], "SKILL.md")
        if member.size > MAX_SKILL_MD:
            log.warning("skills.skipped", path=location, why=f"over {MAX_SKILL_MD} bytes")
            continue
        data = archive.extractfile(member)
        text = data.read().decode("utf-8", errors="replace") if data is not None else ""
        named = front_matter(text)
        if named is None:
            log.warning("skills.skipped", path=location, why="no front matter with name+desc")
            continue
        found.append(Skill(name=named[0], description=named[1], location=location))
    return found


def skills_block(skills: list[Skill]) -> str:
    """The ``<available_skills>`` block (after a newline) naming ``skills``; ``""`` for
    none."""
    if not skills:
        return ""
    root = Element("available_skills")
    for skill in skills:
        entry = SubElement(root, "skill")
        SubElement(entry, "name").text = skill.name
        SubElement(entry, "description").text = skill.description
        SubElement(entry, "location").text = skill.location
    indent(root, space="  ")
    return "\n" + tostring(root, encoding="unicode")


async def read_skills(sandbox: Sandbox, skills_dir: str) -> list[Skill]:
    """The skills in the sandbox's ``skills_dir``, read through the engine; none (with a
    log line) when the folder is missing, too big, or unreadable."""
    with scratch.folder("skills") as tmp:
        archive = Path(tmp) / "skills.tar"
        try:
            await sandbox.download_to(skills_dir, archive, max_bytes=MAX_ARCHIVE)
            with tarfile.open(archive, mode="r:") as tar:
                return skills_in(tar, skills_dir)
        except (OSError, SandboxError, tarfile.TarError) as e:
            log.warning("skills.none", skills_dir=skills_dir, why=str(e)[:200])
            return []
