"""Regenerates workspace/orders.csv (deterministic). Not part of the workspace."""

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
