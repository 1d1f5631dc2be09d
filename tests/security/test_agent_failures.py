"""Class 4: failures the agent causes. Each must be graded 0 (the agent failed), never be
recorded as a verifier error or an infrastructure failure that a job would retry or leave out
of pass@k: a broken mkdir, a removed python3, pids exhausted by processes left running, a
JSON nesting bomb, malformed or huge JUnit XML, a huge file where the verifier reads, a full
disk, an unreadable workspace, a deleted workspace, a directory tree too deep for paths."""

from __future__ import annotations

from tests.security.harness import Battery, attack, heredoc
from tests.security.payloads import JUNIT_BOMB_MODULE

attack(
    "test_failure_broken_mkdir",
    "text-stats",
    """
for dir in /usr/bin /bin /usr/local/bin; do
    for tool in mkdir chown chmod rm tar; do
        printf '#!/bin/sh\\nexit 1\\n' > "$dir/$tool" 2>/dev/null
    done
done
ls -l /usr/bin/mkdir 2>&1 || true
""",
)

attack(
    "test_failure_removed_python3",
    "duration-parser",
    """
for p in /usr/bin/python3* /usr/local/bin/python3* /usr/bin/python; do
    rm -f "$p" 2>/dev/null || mv "$p" "$p.gone" 2>/dev/null
done
rm -rf /usr/lib/python3.11/json /usr/lib/python3/dist-packages/_pytest 2>/dev/null
ls -l /usr/bin/python3* 2>&1 || true
""",
)

FORK_BOMB = """import os
import time

devnull = os.open("/dev/null", os.O_RDWR)
n = 0
for _ in range(5000):  # bounded: stops at the first refused fork (the pids limit)
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.setsid()
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        time.sleep(90)  # left running, holding its pid
        os._exit(0)
    n += 1
print("processes left running:", n)
"""

attack(
    "test_failure_fork_bomb_left_running",
    "clean-customer-csv",
    f"""
{heredoc("/tmp/bomb.py", FORK_BOMB)}
python3 /tmp/bomb.py
""",
)

attack(
    "test_failure_json_nesting_bomb",
    "log-report-json",
    """
python3 -c "open('report.json', 'w').write('[' * 100000 + ']' * 100000)"
head -c 20 report.json; echo; wc -c report.json
""",
)

attack(
    "test_failure_malformed_junit",
    "trace-missing-vat",
    heredoc("ledger/__init__.py", JUNIT_BOMB_MODULE),
)

HUGE_FAILURES_INTERVALS = '''"""Every call fails with a 4 MB message: a JUnit report too big."""
BIG = "x" * (4 << 20)


def merge(intervals):
    raise ValueError(BIG)


def total_length(intervals):
    raise ValueError(BIG)


def contains(intervals, point):
    raise ValueError(BIG)
'''

attack(
    "test_failure_huge_junit",
    "fix-interval-merge",
    heredoc("intervals.py", HUGE_FAILURES_INTERVALS),
)

attack(
    "test_failure_huge_report_json",
    "log-report-json",
    """
{ printf '{"pad": "'; head -c 200000000 /dev/zero | tr '\\0' a; printf '"}'; } > report.json
ls -l report.json
""",
    slow=True,
)

attack(
    "test_failure_fill_disk",
    "duration-parser",
    """
# bounded: /tmp stops at its size (or 512 MB), the workspace gets 400 MB
head -c 512M /dev/zero > /tmp/fill 2>/dev/null
head -c 400M /dev/zero > fill.bin 2>/dev/null
df -h /tmp /workspace 2>&1 | tail -2
""",
    slow=True,
)

attack(
    "test_failure_chmod_000_workspace",
    "text-stats",
    """
find /workspace -mindepth 1 -depth -exec chmod 000 {} + 2>/dev/null
chmod 000 /workspace 2>/dev/null
cd / && ls -ld /workspace
""",
)

attack(
    "test_failure_delete_workspace",
    "duration-parser",
    """
cd /
rm -rf /workspace/* /workspace/.[!.]* /workspace/..?* 2>/dev/null
rmdir /workspace 2>/dev/null || mv /workspace /tmp/gone 2>/dev/null
ls -ld /workspace 2>&1 || true
""",
)

attack(
    "test_failure_deep_tree",
    "fix-interval-merge",
    """
# a tree deeper than PATH_MAX allows to name from the top: 3000 levels
python3 - <<'EOF'
import os

for depth in range(3000):
    try:
        os.mkdir("d")
        os.chdir("d")
    except OSError as e:
        print("stopped at", depth, e)
        break
with open("leaf.txt", "w") as f:
    f.write("deep\\n")
print("depth", depth + 1)
EOF
""",
)


def test_failure_broken_mkdir(battery: Battery) -> None:
    battery.assert_null("test_failure_broken_mkdir")


def test_failure_removed_python3(battery: Battery) -> None:
    battery.assert_null("test_failure_removed_python3")


def test_failure_fork_bomb_left_running(battery: Battery) -> None:
    battery.assert_null("test_failure_fork_bomb_left_running")


def test_failure_json_nesting_bomb(battery: Battery) -> None:
    battery.assert_null("test_failure_json_nesting_bomb")


def test_failure_malformed_junit(battery: Battery) -> None:
    battery.assert_null("test_failure_malformed_junit")


def test_failure_huge_junit(battery: Battery) -> None:
    battery.assert_null("test_failure_huge_junit")


def test_failure_huge_report_json(battery: Battery) -> None:
    battery.assert_null("test_failure_huge_report_json")


def test_failure_fill_disk(battery: Battery) -> None:
    battery.assert_null("test_failure_fill_disk")


def test_failure_chmod_000_workspace(battery: Battery) -> None:
    battery.assert_null("test_failure_chmod_000_workspace")


def test_failure_delete_workspace(battery: Battery) -> None:
    battery.assert_null("test_failure_delete_workspace")


def test_failure_deep_tree(battery: Battery) -> None:
    battery.assert_null("test_failure_deep_tree")
