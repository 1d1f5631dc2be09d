import sqlite3
from collections import defaultdict

import pytest
from shopdb import build

COUNTED = ("paid", "shipped")


@pytest.fixture(scope="module", params=["workspace", "other"])
def db_path(request, tmp_path_factory):
    if request.param == "workspace":
        return "shop.db"
    path = tmp_path_factory.mktemp("db") / "other.db"
    build(str(path), seed=77, n_customers=25, n_orders=300)
    return str(path)


def run(sql_file, db_path):
    with open(sql_file) as f:
        sql = f.read()
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        cur = db.execute(sql)
        cols = [d[0] for d in cur.description]
        return cols, cur.fetchall()
    finally:
        db.close()


def lines_2024(db_path):
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    rows = db.execute(
        "SELECT o.id, o.ordered_at, o.status, c.name, c.country, p.category, i.quantity, "
        "i.unit_price_cents FROM orders o JOIN customers c ON c.id = o.customer_id "
        "JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id"
    ).fetchall()
    db.close()
    return [r for r in rows if r[1][:4] == "2024" and r[2] in COUNTED]


def expected_monthly(db_path):
    groups = defaultdict(lambda: [set(), 0, 0])
    for oid, at, _, _, _, cat, qty, price in lines_2024(db_path):
        g = groups[(at[:7], cat)]
        g[0].add(oid)
        g[1] += qty
        g[2] += qty * price
    rows = [(m, c, len(g[0]), g[1], round(g[2] / 100, 2)) for (m, c), g in groups.items()]
    return sorted(rows, key=lambda r: (r[0], -r[4], r[1]))


def expected_top(db_path):
    groups = defaultdict(lambda: [None, set(), 0])
    for oid, _, _, name, country, _, qty, price in lines_2024(db_path):
        g = groups[name]
        g[0] = country
        g[1].add(oid)
        g[2] += qty * price
    rows = [(n, g[0], len(g[1]), round(g[2] / 100, 2)) for n, g in groups.items()]
    return sorted(rows, key=lambda r: (-r[3], r[0]))[:5]


def same(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=False):
        assert len(a) == len(e)
        for x, y in zip(a, e, strict=False):
            if isinstance(y, float):
                assert x == pytest.approx(y, abs=0.001), (a, e)
            else:
                assert x == y, (a, e)


def test_monthly_revenue(db_path):
    cols, rows = run("monthly_revenue.sql", db_path)
    assert [c.lower() for c in cols] == ["month", "category", "orders", "units", "revenue"]
    same(rows, expected_monthly(db_path))


def test_top_customers(db_path):
    cols, rows = run("top_customers.sql", db_path)
    assert [c.lower() for c in cols] == ["name", "country", "orders", "revenue"]
    same(rows, expected_top(db_path))
