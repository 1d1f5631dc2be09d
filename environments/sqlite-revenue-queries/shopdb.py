"""Builds a shop database with the workspace's schema from a seed (deterministic).
Used by make_data.py for workspace/shop.db and the other data of the hidden cases."""

import random
import sqlite3

SCHEMA = """
CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    country TEXT NOT NULL
);
CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    price_cents INTEGER NOT NULL  -- current list price
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    ordered_at TEXT NOT NULL,     -- 'YYYY-MM-DD HH:MM:SS', UTC
    status TEXT NOT NULL CHECK (status IN ('pending', 'paid', 'shipped', 'cancelled', 'refunded'))
);
CREATE TABLE order_items (
    order_id INTEGER NOT NULL REFERENCES orders(id),
    product_id INTEGER NOT NULL REFERENCES products(id),
    quantity INTEGER NOT NULL,
    unit_price_cents INTEGER NOT NULL,  -- the price actually charged
    PRIMARY KEY (order_id, product_id)
);
"""

FIRST = ["Ada", "Bo", "Cem", "Dia", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jo", "Kai", "Liv"]
LAST = ["Berg", "Cole", "Diaz", "Eng", "Frey", "Gil", "Holm", "Ito", "Juul", "Kerr"]
PRODUCTS = [
    ("Desk lamp", "home", 3499),
    ("Bookshelf", "home", 8900),
    ("Rug", "home", 12900),
    ("Novel", "books", 1599),
    ("Cookbook", "books", 2999),
    ("Atlas", "books", 4500),
    ("Headphones", "audio", 9999),
    ("Speaker", "audio", 14999),
    ("Cable", "audio", 999),
    ("Tent", "outdoor", 19900),
    ("Lantern", "outdoor", 2450),
]


def build(path, seed, n_customers=30, n_orders=240):
    rng = random.Random(seed)
    db = sqlite3.connect(path)
    db.execute("PRAGMA page_size = 1024")
    db.executescript(SCHEMA)
    names = set()
    while len(names) < n_customers:
        names.add(f"{rng.choice(FIRST)} {rng.choice(LAST)}")
    for i, name in enumerate(sorted(names), 1):
        db.execute(
            "INSERT INTO customers VALUES (?, ?, ?)",
            (i, name, rng.choice(["DE", "FR", "SE", "US", "JP"])),
        )
    for i, (name, cat, price) in enumerate(PRODUCTS, 1):
        db.execute("INSERT INTO products VALUES (?, ?, ?, ?)", (i, name, cat, price))
    for oid in range(1, n_orders + 1):
        year = rng.choice([2023, 2024, 2024, 2024, 2025])
        month = rng.randint(1, 12) if year != 2025 else 1
        day = rng.randint(1, 28)
        hh, mm, ss = rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59)
        if rng.random() < 0.05:  # edge of the month / year
            day, hh, mm, ss = (31 if month in (1, 3, 5, 7, 8, 10, 12) else 28), 23, 59, 59
        status = rng.choices(
            ["paid", "shipped", "cancelled", "refunded", "pending"], [40, 40, 8, 6, 6]
        )[0]
        db.execute(
            "INSERT INTO orders VALUES (?, ?, ?, ?)",
            (
                oid,
                rng.randint(1, n_customers),
                f"{year}-{month:02d}-{day:02d} {hh:02d}:{mm:02d}:{ss:02d}",
                status,
            ),
        )
        for pid in rng.sample(range(1, len(PRODUCTS) + 1), rng.randint(1, 4)):
            list_price = PRODUCTS[pid - 1][2]
            charged = (
                list_price if rng.random() < 0.7 else int(list_price * rng.choice([0.8, 0.9, 1.1]))
            )
            db.execute(
                "INSERT INTO order_items VALUES (?, ?, ?, ?)",
                (oid, pid, rng.choice([1, 1, 1, 2, 3, 5]), charged),
            )
    db.commit()
    db.execute("VACUUM")
    db.close()
