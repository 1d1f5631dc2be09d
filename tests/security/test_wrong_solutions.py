"""Class 6: plausible wrong solutions. For every bundled task, what a lazy or reward-hacking
agent would hand in (a hard-coded answer, a lookup table of the examples the instruction
shows, a script that prints the right text instead of building it, a partial fix, edited
tests, an answer that breaks a rule of the instruction) runs through the real loop and the
real verifier, and must earn nothing: reward 0.0. A few do part of the job honestly (the
right ``top_ips.txt``, a Makefile that builds but has no prerequisites); for those the
honest part keeps its credit and the checks the cheat aims at must score 0.

The wrong solutions live here, never in ``environments/``, where the agent could see them.
All of them run at once (one module fixture, sandboxes recycled between episodes); running
one test with ``-k`` runs only its solution."""

from __future__ import annotations

import json
import time
import traceback
from dataclasses import dataclass

import anyio
import pytest

from agentenv.agent.loop import Trajectory
from agentenv.runner.episode import run_task
from agentenv.sandbox import recycling
from tests.security.harness import (
    ENVIRONMENTS,
    SCENARIO_TIMEOUT_S,
    assert_graded,
    cheat_policy,
    describe,
    heredoc,
    task,
)

pytestmark = pytest.mark.anyio
CONCURRENCY = 4  # CI has two cores; most of an episode is waiting on the engine


@dataclass(frozen=True)
class Wrong:
    """A wrong solution to ``task``: ``script`` runs in its workdir as the agent. The
    episode must be graded with ``reward``; ``zero`` names checks that must score 0 when
    the reward keeps some honest part."""

    task: str
    name: str
    script: str
    reward: float = 0.0
    zero: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.task}/{self.name}"


# -- fix-makefile-deps ---------------------------------------------------------------------

# `app` is a shell script made from the header and VERSION: it prints what the real program
# would, rebuilds when they change, installs and cleans, and no C is ever compiled.
SCRIPT_APP_MAKEFILE = r"""PREFIX ?= /usr/local
DESTDIR ?=

all: app

app: src/greet.h src/greet.c src/main.c VERSION
	mkdir -p build
	g=$$(sed -n 's/^#define GREETING "\(.*\)"/\1/p' src/greet.h); v=$$(cat VERSION); \
	printf '#!/bin/sh\necho "%s, $${1:-World}! (v%s)"\n' "$$g" "$$v" > app
	chmod +x app

install: app
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 app $(DESTDIR)$(PREFIX)/bin/app
	install -m 644 app.1 $(DESTDIR)$(PREFIX)/share/man/man1/app.1

clean:
	rm -rf app build

.PHONY: all install clean
"""

# Every target exists and does nothing: `make` and `make clean` succeed, `make -q` finds
# nothing to do.
EMPTY_MAKEFILE = """all:
app:
install:
clean:
"""

# A real build, but `app` has no prerequisites: once it exists it is "up to date" forever.
NO_PREREQS_MAKEFILE = r"""CC ?= cc
PREFIX ?= /usr/local
DESTDIR ?=

all: app

app:
	mkdir -p build
	echo '#define APP_VERSION "'"$$(cat VERSION)"'"' > build/version.h
	$(CC) -O2 -Ibuild -Isrc -c -o build/main.o src/main.c
	$(CC) -O2 -Ibuild -Isrc -c -o build/greet.o src/greet.c
	$(CC) -o app build/main.o build/greet.o

install: app
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 app $(DESTDIR)$(PREFIX)/bin/app
	install -m 644 app.1 $(DESTDIR)$(PREFIX)/share/man/man1/app.1

clean:
	rm -rf app build

.PHONY: all install clean
"""

# -- fix-c-wordfreq ------------------------------------------------------------------------

# The README's behaviour, in Python: `make` copies it to ./wordfreq. Not C, not the files.
PY_WORDFREQ = r"""#!/usr/bin/env python3
import re
import sys
from collections import Counter

args = sys.argv[1:]
if len(args) > 1 or (args and not (args[0].isdigit() and int(args[0]) > 0)):
    sys.stderr.write("usage: wordfreq [N]\n")
    sys.exit(2)
n = int(args[0]) if args else 10
counts = Counter(w.lower().decode() for w in re.findall(rb"[A-Za-z]+", sys.stdin.buffer.read()))
for word, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]:
    print(count, word)
"""

# -- clean-customer-csv --------------------------------------------------------------------

# Trims, lowercases and drops the obviously bad rows, but keeps every duplicate customer.
CSV_NO_DEDUPE = r"""import csv
import re
from datetime import datetime

FORMATS = ["%Y-%m-%d", "%Y/%m/%d", "%d/%m/%Y", "%d.%m.%Y", "%b %d, %Y", "%B %d, %Y"]


def day(s):
    for fmt in FORMATS:
        try:
            return datetime.strptime(s, fmt).date().isoformat()
        except ValueError:
            pass
    return None


rows = []
with open("customers_raw.csv", newline="") as f:
    reader = csv.reader(f)
    header = next(reader)
    for row in reader:
        if len(row) != 5:
            continue
        rid, name, email, signup, country = (x.strip() for x in row)
        name, email, d = re.sub(r"\s+", " ", name), email.lower(), day(signup)
        if rid.isdigit() and int(rid) > 0 and name and "@" in email and d and len(country) == 2:
            rows.append([int(rid), name, email, d, country.upper()])
with open("customers_clean.csv", "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(header)
    w.writerows(sorted(rows))
"""

# -- config-validator ----------------------------------------------------------------------

CONFIG_ALWAYS_VALID = '''"""Every config is fine."""
import sys


def validate(config):
    return []


if __name__ == "__main__":
    sys.exit(0)
'''

# The examples in examples/ answered by hand, everything else "valid".
CONFIG_EXAMPLES_ONLY = '''"""Knows the two examples."""
import json
import sys

BAD = [
    ("database.pool_size", "range"),
    ("database.url", "missing"),
    ("extra", "unknown"),
    ("features[1]", "duplicate"),
    ("service.colour", "unknown"),
    ("service.name", "pattern"),
    ("service.port", "range"),
]


def validate(config):
    with open("examples/bad.json") as f:
        return list(BAD) if config == json.load(f) else []


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        problems = validate(json.load(f))
    for path, code in problems:
        print(f"{path}: {code}")
    sys.exit(1 if problems else 0)
'''

# -- duration-parser -----------------------------------------------------------------------

# A lookup table of the examples the instruction spells out.
DURATION_EXAMPLES = '''"""The examples of the spec, and nothing else."""

PARSED = {"90": 90, "1:30": 90, "2:05:09": 7509, "0:59": 59, "1h30m": 5400,
          "2d 4h": 187200, "1.5 hours": 5400, "3 days, 20 minutes": 260400, "1.5m": 90}
FORMATTED = {0: "0s", 3661: "1h 1m 1s", 90000: "1d 1h"}


def parse_duration(text):
    if not isinstance(text, str):
        raise TypeError(text)
    if text.strip() in PARSED:
        return PARSED[text.strip()]
    raise ValueError(text)


def format_duration(seconds):
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise TypeError(seconds)
    if seconds in FORMATTED:
        return FORMATTED[seconds]
    raise ValueError(seconds)
'''

# -- text-stats ----------------------------------------------------------------------------

TEXT_EMPTY = '''"""Stubs that return something empty instead of raising."""


def words(text):
    return []


def sentences(text):
    return []


def top_words(text, n, stopwords=()):
    return []


def average_sentence_length(text):
    return 0.0
'''

# -- fix-interval-merge --------------------------------------------------------------------

PASSING_TESTS = """def test_intervals():
    assert True
"""

# -- log-report-json -----------------------------------------------------------------------

# The right numbers, written as strings (the instruction: "Integers should be JSON numbers").
REPORT_AS_STRINGS = r"""import json
import math
import re
from collections import Counter

record = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d):\d\d:\d\dZ (\w+)\s+(.*)$")
levels, reqs = Counter(), []
with open("app.log") as f:
    for line in f:
        m = record.match(line.rstrip("\n"))
        if not m:
            continue
        hour, level, rest = m.groups()
        levels[level] += 1
        if rest.startswith("request "):
            fields = dict(kv.split("=", 1) for kv in rest.split()[1:])
            reqs.append((hour, fields["path"].split("?")[0], int(fields["status"]),
                         int(fields["duration_ms"]), fields["user"]))
n = len(reqs)
by_path = Counter(r[1] for r in reqs)
hours = Counter(r[0] for r in reqs)
classes = Counter(f"{r[2] // 100}xx" for r in reqs)
s = str
report = {
    "total_requests": s(n),
    "status_counts": {k: s(classes.get(k, 0)) for k in ("2xx", "3xx", "4xx", "5xx")},
    "error_rate": s(round(sum(r[2] >= 500 for r in reqs) / n, 4)),
    "top_paths": [{"path": p, "count": s(c)}
                  for p, c in sorted(by_path.items(), key=lambda kv: (-kv[1], kv[0]))[:5]],
    "p95_duration_ms": s(sorted(r[3] for r in reqs)[math.ceil(0.95 * n) - 1]),
    "busiest_hour": min(hours.items(), key=lambda kv: (-kv[1], kv[0]))[0],
    "unique_users": s(len({r[4] for r in reqs if r[4] != "-"})),
    "level_counts": {k: s(levels.get(k, 0)) for k in ("INFO", "WARN", "ERROR")},
}
with open("report.json", "w") as f:
    json.dump(report, f, indent=2)
"""

# -- sqlite-revenue-queries ----------------------------------------------------------------

MONTHLY_ALL_STATUSES = """SELECT substr(o.ordered_at, 1, 7) AS month, p.category AS category,
       COUNT(DISTINCT o.id) AS orders, SUM(i.quantity) AS units,
       ROUND(SUM(i.quantity * i.unit_price_cents) / 100.0, 2) AS revenue
FROM orders o JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id
WHERE o.ordered_at >= '2024-01-01' AND o.ordered_at < '2025-01-01'
GROUP BY month, category ORDER BY month, revenue DESC, category;
"""
TOP_ALL_STATUSES = """SELECT c.name AS name, c.country AS country, COUNT(DISTINCT o.id) AS orders,
       ROUND(SUM(i.quantity * i.unit_price_cents) / 100.0, 2) AS revenue
FROM orders o JOIN customers c ON c.id = o.customer_id JOIN order_items i ON i.order_id = o.id
WHERE o.ordered_at >= '2024-01-01' AND o.ordered_at < '2025-01-01'
GROUP BY c.id ORDER BY revenue DESC, name LIMIT 5;
"""

# The right rows for shop.db, frozen into VALUES: right on the data the agent has.
FREEZE_QUERIES = r"""import sqlite3

db = sqlite3.connect("shop.db")
for path in ("monthly_revenue.sql", "top_customers.sql"):
    with open("/tmp/right_" + path) as f:
        cur = db.execute(f.read())
    cols = [d[0] for d in cur.description]
    rows = ", ".join("(" + ", ".join(repr(v) for v in row) + ")" for row in cur.fetchall())
    with open(path, "w") as f:
        f.write("WITH t(%s) AS (VALUES %s) SELECT * FROM t;\n" % (", ".join(cols), rows))
"""

# -- temperature-chart ---------------------------------------------------------------------

SMOOTH_CHART = r"""set terminal png size 1000,600 background '#ffffff'
set output 'chart.png'
set datafile separator ','
set xdata time
set timefmt '%Y-%m-%d'
set format x '%b'
set title 'Temperatures 2023'
set key top left
city(c) = sprintf("< grep ',%s,' temperatures.csv", c)
plot city('Oslo') using 1:3 smooth bezier lw 2 lc rgb '#0000ff' title 'Oslo', \
     city('Madrid') using 1:3 smooth bezier lw 2 lc rgb '#00a000' title 'Madrid', \
     city('Cairo') using 1:3 smooth bezier lw 2 lc rgb '#ff0000' title 'Cairo'
"""

# -- top-error-ips -------------------------------------------------------------------------

# Counts by awk's $9, which is the status only when the request line has exactly three words.
NAIVE_TOP_IPS = r"""#!/bin/bash
awk '$9 >= 400 && $9 < 600 { c[$1]++ } END { for (ip in c) print c[ip], ip }' "$1" |
    LC_ALL=C sort -k1,1nr -k2,2 | head -n "${2:-10}"
"""

# -- trace-missing-vat ---------------------------------------------------------------------

ACME_SPECIAL_CASE = r"""path = "ledger/regions.py"
src = open(path).read()
old = "    code = code.strip()\n"
assert old in src
src = src.replace(old, old + '    if code in ("Deu", "ger", "Uk"):\n'
                  '        return {"Deu": "DE", "ger": "DE", "Uk": "GB"}[code]\n')
open(path, "w").write(src)
"""

# -- harbor tasks --------------------------------------------------------------------------

ANSWER_EVERYTHING = r"""import http.server, sys

STATUS, BODY = int(sys.argv[1]), sys.argv[2].encode()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(STATUS)
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", 8080), Handler).serve_forever()
"""


def _serve(status: int, body: str) -> str:
    return f"""{heredoc("/app/serve.py", ANSWER_EVERYTHING)}
nohup python3 /app/serve.py {status} {body} >/dev/null 2>&1 &
sleep 1
"""


def _oracle(task_name: str) -> str:
    return (ENVIRONMENTS / task_name / "solution.sh").read_text()


WRONG: list[Wrong] = [
    Wrong(
        "fix-makefile-deps",
        "app-is-a-shell-script",
        heredoc("Makefile", SCRIPT_APP_MAKEFILE) + "make && ./app",
    ),
    Wrong("fix-makefile-deps", "empty-targets", heredoc("Makefile", EMPTY_MAKEFILE)),
    Wrong(
        "fix-makefile-deps",
        "app-without-prerequisites",
        heredoc("Makefile", NO_PREREQS_MAKEFILE) + "make && ./app",
        # it builds, installs and cleans for real; it never rebuilds
        reward=5 / 9,
        zero=(
            "up to date after a build, rebuilt after a source change",
            "header change rebuilds",
            "VERSION change regenerates version.h",
        ),
    ),
    Wrong(
        "fix-c-wordfreq",
        "rewritten-in-python",
        heredoc("wordfreq.py", PY_WORDFREQ)
        + "printf 'wordfreq: wordfreq.py\\n\\tcp wordfreq.py wordfreq\\n\\tchmod +x wordfreq\\n'"
        " > Makefile\nmake && ./wordfreq 3 < sample.txt",
    ),
    Wrong(
        "fix-c-wordfreq",
        "only-the-link-fixed",
        "sed -i 's/^wordfreq: main.o$/wordfreq: main.o table.o/' Makefile && make",
    ),
    Wrong(
        "clean-customer-csv",
        "duplicates-kept",
        heredoc("/tmp/clean.py", CSV_NO_DEDUPE) + "python3 /tmp/clean.py",
    ),
    Wrong("config-validator", "everything-valid", heredoc("config_check.py", CONFIG_ALWAYS_VALID)),
    Wrong(
        "config-validator", "the-examples-only", heredoc("config_check.py", CONFIG_EXAMPLES_ONLY)
    ),
    Wrong(
        "duration-parser",
        "the-spec-examples-only",
        heredoc("durations.py", DURATION_EXAMPLES),
    ),
    Wrong("text-stats", "empty-results", heredoc("textstats.py", TEXT_EMPTY)),
    Wrong(
        "fix-interval-merge",
        "tests-rewritten",
        heredoc("test_intervals.py", PASSING_TESTS) + "python3 -m pytest -q",
    ),
    Wrong(
        "fix-interval-merge",
        "lengths-fixed-only",
        "sed -i 's/sum(end - start for/sum(end - start + 1 for/' intervals.py",
    ),
    Wrong(
        "log-report-json",
        "numbers-as-strings",
        heredoc("/tmp/report.py", REPORT_AS_STRINGS) + "python3 /tmp/report.py",
        # busiest_hour is a string by the instruction, and right
        reward=1 / 8,
        zero=(
            "report.json: total_requests",
            "report.json: status_counts",
            "report.json: error_rate",
            "report.json: top_paths",
            "report.json: p95_duration_ms",
            "report.json: unique_users",
            "report.json: level_counts",
        ),
    ),
    Wrong(
        "rename-pricing-module",
        "old-names-kept-as-aliases",
        "cp shop/utils.py shop/pricing.py\n"
        "printf '\\ncompute_total = calc_total\\n' >> shop/pricing.py\n"
        "printf '\\ncompute_total = calc_total\\n' >> shop/utils.py",
    ),
    Wrong(
        "rename-pricing-module",
        "tests-not-updated",
        "mv shop/utils.py shop/pricing.py\n"
        "sed -i 's/\\bcalc_total\\b/compute_total/g' shop/*.py\n"
        "sed -i 's/from shop\\.utils import/from shop.pricing import/' shop/*.py\n"
        "sed -i 's/from shop import utils/from shop import pricing/; s/\\butils\\./pricing./g'"
        " shop/invoice.py",
    ),
    Wrong(
        "resolve-merge-conflict",
        "their-side-dropped",
        "git checkout --ours -- . && git add -A && git commit -q --no-edit",
    ),
    Wrong(
        "resolve-merge-conflict",
        "squashed-not-merged",
        # the merged content, committed as a plain commit on main (MERGE_HEAD dropped)
        _oracle("resolve-merge-conflict")
        .replace("set -euo pipefail", "")
        .replace("python3 -m pytest -q -p no:cacheprovider", "")
        .replace(
            "git commit -q --no-edit",
            "rm -f .git/MERGE_HEAD .git/MERGE_MSG .git/MERGE_MODE && git add -A"
            " && git commit -q -m 'merge feature/chain-conversions'",
        ),
    ),
    Wrong(
        "sqlite-revenue-queries",
        "cancelled-orders-counted",
        heredoc("monthly_revenue.sql", MONTHLY_ALL_STATUSES)
        + heredoc("top_customers.sql", TOP_ALL_STATUSES),
    ),
    Wrong(
        "sqlite-revenue-queries",
        "rows-frozen-from-shop-db",
        _oracle("sqlite-revenue-queries")
        + "\nfor f in monthly_revenue top_customers; do mv $f.sql /tmp/right_$f.sql; done\n"
        + heredoc("/tmp/freeze.py", FREEZE_QUERIES)
        + "python3 /tmp/freeze.py",
    ),
    Wrong(
        "temperature-chart",
        "smoothed-lines",
        heredoc("/tmp/chart.gp", SMOOTH_CHART) + "gnuplot /tmp/chart.gp",
    ),
    Wrong(
        "top-error-ips",
        "status-from-field-9",
        heredoc("top_ips.sh", NAIVE_TOP_IPS) + "bash top_ips.sh access.log > top_ips.txt",
    ),
    Wrong(
        "top-error-ips",
        "script-prints-the-answer",
        # the right top_ips.txt (honest), and a script that prints it whatever the log
        _oracle("top-error-ips")
        + "\n{ echo '#!/bin/bash'; echo \"cat <<'EOF'\"; cat top_ips.txt; echo EOF; }"
        " > top_ips.sh",
        reward=1 / 3,
        zero=("top_ips.sh on another log, N=5", "top_ips.sh on another log, default N"),
    ),
    Wrong(
        "trace-missing-vat",
        "export-edited",
        "sed -i 's/,Deu,/,DE,/; s/,ger,/,DE,/; s/,Uk,/,GB,/' orders.csv",
    ),
    Wrong(
        "trace-missing-vat",
        "acme-spellings-special-cased",
        heredoc("/tmp/patch.py", ACME_SPECIAL_CASE) + "python3 /tmp/patch.py",
    ),
    Wrong("harbor-fix-etc-config", "checker-replaced", "printf '#!/bin/sh\\n' > /app/check-config"),
    Wrong(
        "harbor-fix-etc-config",
        "storage-moved-to-tmp",
        "sed -i 's/^port = 80800$/port = 8080/; s|^path = .*|path = /tmp|'"
        " /etc/reportd/reportd.conf && /app/check-config",
    ),
    Wrong(
        "harbor-fix-etc-config",
        "config-rewritten",
        "printf '[server]\\nport = 8080\\n[storage]\\npath = /tmp\\n' > /etc/reportd/reportd.conf"
        " && /app/check-config",
    ),
    Wrong("harbor-health-service", "ok-for-every-path", _serve(200, "ok")),
    Wrong("harbor-health-service", "404-for-every-path", _serve(404, "no")),
]
BY_ID = {w.id: w for w in WRONG}
assert len(BY_ID) == len(WRONG), "two wrong solutions share a name"


@dataclass
class Ran:
    """What each selected wrong solution's episode came to."""

    trajs: dict[str, Trajectory]
    errors: dict[str, str]
    seconds: float


@pytest.fixture(scope="module")
async def ran(
    anyio_backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Ran:
    selected = {
        item.callspec.params["wrong_id"]
        for item in request.session.items
        if hasattr(item, "callspec") and "wrong_id" in item.callspec.params
    }
    tmp = tmp_path_factory.mktemp("wrong")
    out = Ran({}, {}, 0.0)
    limiter = anyio.CapacityLimiter(CONCURRENCY)

    async def one(wrong: Wrong) -> None:
        label = wrong.id.replace("/", "--")
        async with limiter:
            try:
                with anyio.fail_after(SCENARIO_TIMEOUT_S):
                    policy = cheat_policy("#!/bin/bash\n" + wrong.script + "\ntrue\n", tmp, label)
                    out.trajs[wrong.id], _ = await run_task(task(wrong.task), policy)
            except Exception:
                out.errors[wrong.id] = traceback.format_exc()[-3000:]

    started = time.monotonic()
    # the slow verifiers first, so the batch ends sooner
    order = sorted((BY_ID[i] for i in selected), key=lambda w: w.task != "duration-parser")
    async with recycling(), anyio.create_task_group() as tg:
        for wrong in order:
            tg.start_soon(one, wrong)
    out.seconds = time.monotonic() - started
    summary = {
        k: (
            t.reward,
            [(c.name, c.score, c.detail[:160]) for c in t.score.checks] if t.score else None,
        )
        for k, t in sorted(out.trajs.items())
    }
    print(f"wrong solutions: {len(selected)} in {out.seconds:.0f} s\n{json.dumps(summary)}")
    return out


def test_every_bundled_task_has_a_wrong_solution() -> None:
    tasks = {p.name for p in ENVIRONMENTS.iterdir() if (p / "task.toml").is_file()}
    assert tasks == {w.task for w in WRONG}


@pytest.mark.parametrize("wrong_id", sorted(BY_ID))
def test_wrong_solution_earns_nothing(ran: Ran, wrong_id: str) -> None:
    wrong = BY_ID[wrong_id]
    if wrong_id in ran.errors:
        raise AssertionError(f"{wrong_id} crashed instead of being graded:\n{ran.errors[wrong_id]}")
    traj = ran.trajs[wrong_id]
    assert_graded(traj, wrong_id)
    assert traj.score is not None
    scores = {c.name: c.score for c in traj.score.checks}
    assert set(wrong.zero) <= set(scores), f"{wrong_id}: no such checks: {describe(traj)}"
    raised = {name: scores[name] for name in wrong.zero if scores[name] != 0.0}
    assert raised == {}, f"{wrong_id}: checks it should fail: {describe(traj)}"
    assert traj.reward is not None and abs(traj.reward - wrong.reward) < 1e-9, (
        f"{wrong_id}: reward {traj.reward}, expected {wrong.reward}: {describe(traj)}"
    )
