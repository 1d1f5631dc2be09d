"""Regenerates workspace/app.log (deterministic) and prints the expected report.
Not part of the workspace."""

import json
import math
import random
from collections import Counter
from datetime import datetime, timedelta

rng = random.Random(7)
paths = [
    ("/api/orders", 30),
    ("/api/orders/{id}", 18),
    ("/api/users/{id}", 14),
    ("/api/search", 12),
    ("/health", 10),
    ("/api/cart", 9),
    ("/login", 5),
    ("/api/export", 2),
]
methods = {
    "/api/orders": ["GET", "GET", "POST"],
    "/api/cart": ["GET", "POST", "DELETE"],
    "/login": ["POST"],
}
statuses = [
    (200, 70),
    (201, 5),
    (204, 3),
    (301, 2),
    (304, 4),
    (400, 4),
    (401, 3),
    (404, 5),
    (500, 3),
    (502, 1),
    (503, 1),
]
t = datetime(2024, 3, 11, 6, 58, 0)
lines = []
reqs = []
levels = Counter()
for i in range(460):
    t += timedelta(seconds=rng.randint(5, 120) if not 13 <= t.hour < 15 else rng.randint(1, 30))
    ts = t.strftime("%Y-%m-%dT%H:%M:%SZ")
    r = rng.random()
    if r < 0.06:
        lvl, msg = rng.choice(
            [
                ("WARN", "cache miss ratio above 0.4"),
                ("WARN", "slow query on table orders"),
                ("ERROR", "db connection reset by peer; retrying"),
                ("INFO", "config reloaded"),
                ("ERROR", "worker 3 crashed: MemoryError"),
            ]
        )
        lines.append(f"{ts} {lvl:<5} {msg}")
        levels[lvl] += 1
        continue
    if r < 0.075:
        # a stack-trace continuation line: no timestamp, not a log record
        lines.append("    at handler.process (handler.py:88)")
        continue
    path = rng.choices([p for p, _ in paths], [w for _, w in paths])[0]
    if "{id}" in path:
        path = path.replace("{id}", str(rng.randint(1, 400)))
    base = path
    if base.startswith("/api/search") or (base == "/api/orders" and rng.random() < 0.3):
        path += "?q=" + rng.choice(["shoes", "red+hat", "lamp"]) + "&page=" + str(rng.randint(1, 4))
    status = rng.choices([s for s, _ in statuses], [w for _, w in statuses])[0]
    dur = int(rng.lognormvariate(4.2, 0.7)) + (rng.randint(800, 3000) if status >= 500 else 0)
    method = rng.choice(methods.get(base, ["GET"]))
    lvl = "ERROR" if status >= 500 else ("WARN" if status >= 400 else "INFO")
    levels[lvl] += 1
    user = f"u{rng.randint(1, 90)}" if rng.random() < 0.8 else "-"
    lines.append(
        f"{ts} {lvl:<5} request id={i:04x} method={method} path={path} status={status} "
        f"duration_ms={dur} user={user}"
    )
    reqs.append((ts, method, path.split("?")[0], status, dur, user))

with open("workspace/app.log", "w") as f:
    f.write("\n".join(lines) + "\n")

n = len(reqs)
status_counts = Counter(f"{s // 100}xx" for _, _, _, s, _, _ in reqs)
by_path = Counter(p for _, _, p, _, _, _ in reqs)
top = sorted(by_path.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
durs = sorted(d for *_, d, _ in reqs)
p95 = durs[math.ceil(0.95 * n) - 1]
hours = Counter(ts[:13] for ts, *_ in reqs)
busiest = sorted(hours.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
users = {u for *_, u in reqs if u != "-"}
report = {
    "total_requests": n,
    "status_counts": {k: status_counts.get(k, 0) for k in ("2xx", "3xx", "4xx", "5xx")},
    "error_rate": round(sum(1 for r in reqs if r[3] >= 500) / n, 4),
    "top_paths": [{"path": p, "count": c} for p, c in top],
    "p95_duration_ms": p95,
    "busiest_hour": busiest,
    "unique_users": len(users),
    "level_counts": {k: levels[k] for k in ("INFO", "WARN", "ERROR")},
}
print(json.dumps(report, indent=2))
print(hours.most_common(4), by_path.most_common(7))
