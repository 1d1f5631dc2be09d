"""Regenerates workspace/access.log, tests/hidden.log and the expected outputs in tests/
(deterministic). Not part of the workspace."""

import random
from collections import Counter
from datetime import datetime, timedelta

AGENTS = [
    "Mozilla/5.0 (X11; Linux x86_64; rv:124.0) Gecko/20100101 Firefox/124.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko)",
    "curl/8.5.0",
    "python-requests/2.31.0",
    "-",
]
PATHS = [
    "/",
    "/index.html",
    "/api/items?page=2",
    "/login",
    "/static/app.js",
    "/admin",
    "/wp-login.php",
    "/api/items/17",
    "/favicon.ico",
    "/search?q=a+b",
]


def make(seed, n, ips_n):
    rng = random.Random(seed)
    ips = [
        "%d.%d.%d.%d"
        % (
            rng.choice([10, 172, 192, 203, 198]),
            rng.randint(0, 255),
            rng.randint(0, 255),
            rng.randint(1, 254),
        )
        for _ in range(ips_n)
    ]
    # a few "noisy" clients make most of the errors; some IPs share prefixes
    ips += ["10.0.0.1", "10.0.0.10", "10.0.0.100", "192.168.1.5", "192.168.1.50"]
    weights = [rng.choice([1, 1, 2, 3, 8]) for _ in ips]
    t = datetime(2024, 5, 17, 0, 0, 0)
    lines, errors = [], Counter()
    for _ in range(n):
        t += timedelta(seconds=rng.randint(1, 40))
        ip = rng.choices(ips, weights)[0]
        noisy = ip.startswith(("10.0.0.", "192.168.1."))
        ts = t.strftime("%d/%b/%Y:%H:%M:%S +0000")
        if rng.random() < 0.03:
            # a malformed request: nginx logs it with "-" as the request line
            status, req, size = 400, "-", 0
        else:
            path = rng.choice(PATHS)
            method = rng.choice(["GET", "GET", "GET", "POST", "HEAD"])
            if noisy and rng.random() < 0.6:
                status = rng.choice([401, 403, 404, 404, 500, 503])
            else:
                status = rng.choices([200, 301, 304, 404, 500], [85, 4, 6, 4, 1])[0]
            req = f"{method} {path} HTTP/1.1"
            size = rng.randint(0, 40000) if status == 200 else rng.randint(0, 600)
        referer = rng.choice(["-", "https://shop.example/", "https://shop.example/cart"])
        lines.append(f'{ip} - - [{ts}] "{req}" {status} {size} "{referer}" "{rng.choice(AGENTS)}"')
        if status >= 400:
            errors[ip] += 1
    return "\n".join(lines) + "\n", errors


def top(errors, k):
    ranked = sorted(errors.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
    return "".join(f"{c} {ip}\n" for ip, c in ranked)


log, errors = make(11, 330, 40)
open("workspace/access.log", "w").write(log)
open("tests/expected_top10.txt", "w").write(top(errors, 10))
hidden, herrors = make(12, 350, 45)
open("tests/hidden.log", "w").write(hidden)
open("tests/hidden_top5.txt", "w").write(top(herrors, 5))
open("tests/hidden_top10.txt", "w").write(top(herrors, 10))
print(top(errors, 14))
print(top(herrors, 12))
