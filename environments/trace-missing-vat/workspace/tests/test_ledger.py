from ledger.models import Line, Order
from ledger.pricing import price_order
from ledger.regions import canonical_region
from ledger.tax import vat_percent


def test_canonical_region():
    assert canonical_region("DE") == "DE"
    assert canonical_region(" fr ") == "FR"
    assert canonical_region("UK") == "GB"


def test_vat():
    assert vat_percent("DE") == 19
    assert vat_percent("US") == 0


def test_price_order():
    order = Order(1, "X", "NL", "2024-03-01", [Line("KB-01", 2), Line("CB-05", 1)])
    t = price_order(order)
    assert (t.net, t.vat, t.gross) == (10879, 2285, 13164)
