"""Order totals."""

from ledger.catalog import unit_price
from ledger.models import Totals
from ledger.tax import vat_percent


def price_order(order):
    """Net, VAT (rounded half up to the cent, on the order's net total) and gross."""
    net = sum(unit_price(line.sku) * line.qty for line in order.lines)
    vat = (net * vat_percent(order.region) + 50) // 100
    return Totals(net=net, vat=vat, gross=net + vat)
