"""The host-side scan of an in-process pytest check's workspace cannot be dodged by size:
what it does not read (a file past its per-file cap, files past its total budget) is
itself a finding, never a silent pass."""

from __future__ import annotations

import io
import tarfile

import pytest

from agentenv.archive import Archive
from agentenv.verify.suspicious import MAX_FILE, MAX_TOTAL, scan

pytestmark = pytest.mark.no_docker

ALWAYS_EQUAL = b"class Value:\n    def __eq__(self, other):\n        return True\n"


def tar(files: dict[str, bytes]) -> Archive:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as out:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
    return Archive.from_bytes(buf.getvalue())


def test_an_always_equal_class_is_found() -> None:
    assert scan(tar({"calc.py": ALWAYS_EQUAL})) == [
        "calc.py: __eq__ ignores what it is compared with"
    ]


def test_padding_one_file_past_the_cap_does_not_hide_it() -> None:
    padded = ALWAYS_EQUAL + b"#" * MAX_FILE + b"\n"
    found = scan(tar({"calc.py": padded}))
    assert found and found[0].startswith("calc.py: not looked at"), found


def test_padding_the_workspace_past_the_budget_does_not_hide_a_file() -> None:
    pad = b"#" * (MAX_FILE - 1) + b"\n"
    files = {f"pad{i:03}.py": pad for i in range(MAX_TOTAL // MAX_FILE + 1)}
    files["zz_calc.py"] = ALWAYS_EQUAL
    found = scan(tar(files))
    assert any("not looked at" in f for f in found), found


def test_files_as_they_were_before_the_agent_are_left_out() -> None:
    big = b"#" * (MAX_FILE + 10)
    before = tar({"vendored.py": big, "calc.py": ALWAYS_EQUAL})
    assert scan(tar({"vendored.py": big, "calc.py": ALWAYS_EQUAL}), before) == []


def test_a_finding_the_file_had_before_the_agent_is_not_one_a_new_one_is() -> None:
    # a repo's own module reads frames; a patch to it that leaves that alone is not flagged
    # (SWE-bench patches change such files); an always-equal class added to it is
    frames = b"import sys\n\ndef caller():\n    return sys._getframe(1).f_code.co_name\n"
    before = tar({"pkg/util.py": frames})
    patched = frames + b"\ndef fixed(x):\n    return x + 1\n"
    assert scan(tar({"pkg/util.py": patched}), before) == []
    found = scan(tar({"pkg/util.py": patched + ALWAYS_EQUAL}), before)
    assert found == ["pkg/util.py: __eq__ ignores what it is compared with"], found


def test_files_changed_to_fill_the_list_do_not_hide_the_one_after_them() -> None:
    frames = b"import sys\nf = sys._getframe\n"
    names = [f"m{i:02}.py" for i in range(20)]
    before = tar(dict.fromkeys(names, frames))
    after = {name: frames + b"# touched\n" for name in names}
    after["zz.py"] = ALWAYS_EQUAL
    assert scan(tar(after), before) == ["zz.py: __eq__ ignores what it is compared with"]
