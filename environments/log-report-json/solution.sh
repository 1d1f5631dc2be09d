#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import json
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
durations = sorted(r[3] for r in reqs)
hours = Counter(r[0] for r in reqs)
classes = Counter(f"{r[2] // 100}xx" for r in reqs)
report = {
    "total_requests": n,
    "status_counts": {k: classes.get(k, 0) for k in ("2xx", "3xx", "4xx", "5xx")},
    "error_rate": round(sum(r[2] >= 500 for r in reqs) / n, 4),
    "top_paths": [{"path": p, "count": c}
                  for p, c in sorted(by_path.items(), key=lambda kv: (-kv[1], kv[0]))[:5]],
    "p95_duration_ms": durations[math.ceil(0.95 * n) - 1],
    "busiest_hour": min(hours.items(), key=lambda kv: (-kv[1], kv[0]))[0],
    "unique_users": len({r[4] for r in reqs if r[4] != "-"}),
    "level_counts": {k: levels.get(k, 0) for k in ("INFO", "WARN", "ERROR")},
}
with open("report.json", "w") as f:
    json.dump(report, f, indent=2)
print(json.dumps(report))
PY
