"""Regenerates workspace/shop.db and tests/cases.json, the outputs check's cases
(deterministic). Run from the task folder. Not part of the workspace; the cases file never
enters a sandbox.

Each case runs one of the agent's SQL files on a database given as an SQL dump (the
workspace's data, and other data from another seed); the expected rows are computed here in
Python, never with the agent's SQL."""

import json
import os
import sqlite3
import tempfile
from collections import defaultdict

from shopdb import build

COUNTED = ("paid", "shipped")

if os.path.exists("workspace/shop.db"):
    os.remove("workspace/shop.db")
build("workspace/shop.db", seed=2024)


def lines_2024(db):
    rows = db.execute(
        "SELECT o.id, o.ordered_at, o.status, c.name, c.country, p.category, i.quantity, "
        "i.unit_price_cents FROM orders o JOIN customers c ON c.id = o.customer_id "
        "JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id"
    ).fetchall()
    return [r for r in rows if r[1][:4] == "2024" and r[2] in COUNTED]


def expected_monthly(db):
    groups = defaultdict(lambda: [set(), 0, 0])
    for oid, at, _, _, _, cat, qty, price in lines_2024(db):
        g = groups[(at[:7], cat)]
        g[0].add(oid)
        g[1] += qty
        g[2] += qty * price
    rows = [[m, c, len(g[0]), g[1], round(g[2] / 100, 2)] for (m, c), g in groups.items()]
    return sorted(rows, key=lambda r: (r[0], -r[4], r[1]))


def expected_top(db):
    groups = defaultdict(lambda: [None, set(), 0])
    for oid, _, _, name, country, _, qty, price in lines_2024(db):
        g = groups[name]
        g[0] = country
        g[1].add(oid)
        g[2] += qty * price
    rows = [[n, g[0], len(g[1]), round(g[2] / 100, 2)] for n, g in groups.items()]
    return sorted(rows, key=lambda r: (-r[3], r[0]))[:5]


with tempfile.TemporaryDirectory() as tmp:
    other = os.path.join(tmp, "other.db")
    build(other, seed=77, n_customers=25, n_orders=300)
    cases = []
    for label, path in [("workspace data", "workspace/shop.db"), ("other data", other)]:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        dump = "\n".join(db.iterdump()) + "\n"
        queries = [
            ("monthly_revenue.sql", ["month", "category", "orders", "units", "revenue"]),
            ("top_customers.sql", ["name", "country", "orders", "revenue"]),
        ]
        for sql, columns in queries:
            rows = expected_monthly(db) if sql.startswith("monthly") else expected_top(db)
            cases.append(
                {
                    "name": f"{sql} on the {label}",
                    "args": [sql, "{inputs}/shop.sql"],
                    "files": {"shop.sql": dump},
                    "expect": {"columns": columns, "rows": rows},
                }
            )
            print(cases[-1]["name"], len(rows), "rows")
        db.close()
text = "[\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases) + "\n]\n"
with open("tests/cases.json", "w") as f:
    f.write(text)
