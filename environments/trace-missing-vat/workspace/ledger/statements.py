"""Customer statements."""

from ledger.pricing import price_order


def money(cents):
    return f"{cents // 100}.{cents % 100:02d}"


def customer_statement(orders, customer, month=None):
    """A plain-text statement of ``customer``'s orders (optionally only ``month``,
    ``YYYY-MM``), one line per order and a total line."""
    mine = [o for o in orders if o.customer == customer and (month is None or o.day.startswith(month))]
    lines = [f"Statement for {customer}" + (f", {month}" if month else "")]
    net = vat = gross = 0
    for order in mine:
        t = price_order(order)
        net, vat, gross = net + t.net, vat + t.vat, gross + t.gross
        lines.append(
            f"{order.order_id}  {order.day}  net {money(t.net):>9}  VAT {money(t.vat):>8}"
            f"  gross {money(t.gross):>9}"
        )
    lines.append(f"TOTAL             net {money(net):>9}  VAT {money(vat):>8}  gross {money(gross):>9}")
    return "\n".join(lines)
