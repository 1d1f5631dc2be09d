"""Sales report over many orders."""

from shop.utils import calc_total as order_total, format_money


def daily_revenue(orders):
    """``orders``: dicts with ``day``, ``items`` and optional ``tax_rate`` and
    ``discount_pct``. Returns ``{day: cents}`` in day order."""
    out = {}
    for order in orders:
        cents = order_total(
            order["items"], order.get("tax_rate", 0.0), order.get("discount_pct", 0)
        )
        out[order["day"]] = out.get(order["day"], 0) + cents
    return dict(sorted(out.items()))


def render_report(orders):
    return "\n".join(f"{day}: {format_money(c)}" for day, c in daily_revenue(orders).items())
