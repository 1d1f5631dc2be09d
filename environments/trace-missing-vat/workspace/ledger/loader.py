"""Reads the shop's order export: one CSV row per order line."""

import csv

from ledger.models import Line, Order


def load_orders(path):
    """Orders from ``path`` (columns ``order_id,day,customer,region,sku,qty``), in the
    order they first appear. Rows of the same order are merged into one :class:`Order`."""
    orders = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            oid = int(row["order_id"])
            order = orders.get(oid)
            if order is None:
                order = orders[oid] = Order(
                    order_id=oid,
                    customer=row["customer"].strip(),
                    region=row["region"],
                    day=row["day"].strip(),
                )
            order.lines.append(Line(sku=row["sku"].strip(), qty=int(row["qty"])))
    return list(orders.values())
