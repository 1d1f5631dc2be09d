import hashlib

import pytest
from ledger.loader import load_orders
from ledger.models import Line, Order
from ledger.pricing import price_order
from ledger.regions import canonical_region
from ledger.statements import customer_statement
from ledger.tax import vat_percent


def test_export_untouched():
    data = open("orders.csv", "rb").read()
    assert hashlib.sha256(data).hexdigest() == (
        "f4f718f289d4f1821937614951207ed2ef0b0de4dbc42e873b27031e78429a38"
    )


@pytest.mark.parametrize(
    "written, iso",
    [
        ("DE", "DE"),
        ("de", "DE"),
        ("Deu", "DE"),
        ("deu", "DE"),
        ("ger", "DE"),
        ("GER", "DE"),
        (" uk ", "GB"),
        ("Uk", "GB"),
        ("gbr", "GB"),
        ("fra", "FR"),
        ("Nld", "NL"),
        ("usa", "US"),
        ("che", "CH"),
        ("aut", "AT"),
        (" ch ", "CH"),
        ("fr", "FR"),
        ("xx", "XX"),
    ],
)
def test_canonical_region(written, iso):
    assert canonical_region(written) == iso


@pytest.mark.parametrize(
    "region, pct",
    [
        ("Deu", 19),
        ("ger", 19),
        ("uk", 20),
        ("Gbr", 20),
        ("fra", 20),
        ("nld", 21),
        ("at", 20),
        ("aut", 20),
        ("CH", 0),
        ("usa", 0),
        ("JP", 0),
    ],
)
def test_vat_percent(region, pct):
    assert vat_percent(region) == pct


def test_price_order_with_alias():
    order = Order(1, "X", "Deu", "2024-03-01", [Line("KB-01", 2), Line("CB-05", 1)])
    t = price_order(order)
    assert (t.net, t.vat, t.gross) == (10879, 2067, 12946)


def test_acme_march_statement():
    text = customer_statement(load_orders("orders.csv"), "ACME GmbH", "2024-03")
    assert text.splitlines()[-1] == (
        "TOTAL             net   5212.25  VAT   990.33  gross   6202.58"
    )


def test_every_acme_order_has_vat():
    orders = [o for o in load_orders("orders.csv") if o.customer == "ACME GmbH"]
    for order in orders:
        t = price_order(order)
        assert t.vat == (t.net * 19 + 50) // 100, order.order_id


def test_northwind_statement():
    text = customer_statement(load_orders("orders.csv"), "Northwind Ltd")
    assert text.splitlines()[-1] == (
        "TOTAL             net   5658.40  VAT  1131.68  gross   6790.08"
    )
