"""Regenerates workspace/orders.csv and the hidden cases, tests/cases.json and tests/ledger.json
(deterministic). Run from the task folder. Not part of the workspace."""

import random

rng = random.Random(3)
customers = {
    "ACME GmbH": ["DE", "DE", "de", "DE", "Deu", "DE", "DE", "ger", "DE"],
    "Bolt SARL": ["FR", "FR", "fr", "FRA"],
    "Northwind Ltd": ["GB", "UK", "GB", "gb", "Uk"],
    "Tulip BV": ["NL", "NL", "nl"],
    "Alpen AG": ["CH", "CH"],
    "Peak Inc": ["US", "usa", "US"],
}
skus = ["KB-01", "MS-02", "MN-27", "CB-05", "DK-10", "HS-03"]
orders = []
for customer, regions in customers.items():
    for region in regions:
        orders.append((customer, region))
# ACME's odd spellings must land in March
rng.shuffle(orders)
rows = ["order_id,day,customer,region,sku,qty"]
for i, (customer, region) in enumerate(orders):
    oid = 1001 + i
    day = f"2024-{2 + i * 2 // len(orders):02d}-{rng.randint(1, 28):02d}"
    if customer == "ACME GmbH" and region in ("Deu", "ger"):
        day = f"2024-03-{rng.randint(1, 28):02d}"
    for sku in rng.sample(skus, rng.randint(1, 3)):
        rows.append(f"{oid},{day},{customer},{region},{sku},{rng.randint(1, 12)}")
open("workspace/orders.csv", "w").write("\n".join(rows) + "\n")

# -- tests/cases.json and tests/ledger.json: the outputs checks' cases ----------------------
# Expected values come from the reference below (the ledger as it should work), never from
# the workspace's code. The cases files never enter a sandbox.

import hashlib  # noqa: E402
import json  # noqa: E402
from collections import OrderedDict  # noqa: E402

PRICES = {"KB-01": 4990, "MS-02": 2450, "MN-27": 21900, "CB-05": 899, "DK-10": 13999, "HS-03": 7900}
ALIASES = {"UK": "GB", "GBR": "GB", "GER": "DE", "DEU": "DE", "FRA": "FR", "NLD": "NL"}
ALIASES |= {"AUT": "AT", "CHE": "CH", "USA": "US"}
VAT = {"DE": 19, "AT": 20, "FR": 20, "NL": 21, "GB": 20}


def canonical(region):
    region = region.strip().upper()
    return ALIASES.get(region, region)


def vat_percent(region):
    return VAT.get(canonical(region), 0)


def totals(region, lines):
    net = sum(PRICES[sku] * qty for sku, qty in lines)
    vat = (net * vat_percent(region) + 50) // 100
    return [net, vat, net + vat]


def money(cents):
    return f"{cents // 100}.{cents % 100:02d}"


def read_orders():
    orders = OrderedDict()
    for row in rows[1:]:
        oid, day, customer, region, sku, qty = row.split(",")
        order = orders.setdefault(int(oid), {"day": day, "customer": customer, "region": region})
        order.setdefault("lines", []).append((sku, int(qty)))
    return orders


def statement_total(customer, month=None):
    net = vat = gross = 0
    for o in read_orders().values():
        if o["customer"] == customer and (month is None or o["day"].startswith(month)):
            n, v, g = totals(o["region"], o["lines"])
            net, vat, gross = net + n, vat + v, gross + g
    return f"TOTAL             net {money(net):>9}  VAT {money(vat):>8}  gross {money(gross):>9}"


def dump(cases, path):
    text = "[\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases) + "\n]\n"
    open(path, "w").write(text)


regions = ["DE", "de", "Deu", "deu", "ger", "GER", " uk ", "Uk", "gbr", "fra", "Nld", "usa"]
regions += ["che", "aut", " ch ", "fr", "xx"]
functions = [
    {"name": f"canonical_region({r!r})", "function": "canonical_region", "args": [r]}
    | {"expect": canonical(r)}
    for r in regions
]
functions += [
    {"name": f"vat_percent({r!r})", "function": "ledger.tax:vat_percent", "args": [r]}
    | {"expect": vat_percent(r)}
    for r in ["Deu", "ger", "uk", "Gbr", "fra", "nld", "at", "aut", "CH", "usa", "JP"]
]
dump(functions, "tests/cases.json")

export = "\n".join(rows) + "\n"
acme = [
    [oid, *totals(o["region"], o["lines"])]
    for oid, o in read_orders().items()
    if o["customer"] == "ACME GmbH"
]
assert all(vat == (net * 19 + 50) // 100 for _, net, vat, _ in acme)
ledger = [
    {"name": "orders.csv untouched", "args": ["sha256", "orders.csv"]}
    | {"expect": hashlib.sha256(export.encode()).hexdigest()},
    {"name": "price_order, region 'Deu'", "args": ["price", "Deu", "KB-01=2", "CB-05=1"]}
    | {"expect": totals("Deu", [("KB-01", 2), ("CB-05", 1)])},
    {"name": "ACME GmbH statement, 2024-03", "args": ["statement", "ACME GmbH", "2024-03"]}
    | {"expect": statement_total("ACME GmbH", "2024-03")},
    {"name": "every ACME GmbH order has 19 % VAT", "args": ["totals", "ACME GmbH"], "expect": acme},
    {"name": "Northwind Ltd statement", "args": ["statement", "Northwind Ltd"]}
    | {"expect": statement_total("Northwind Ltd")},
]
dump(ledger, "tests/ledger.json")
