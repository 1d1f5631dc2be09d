"""Plain-text invoices."""

from shop import utils


def render_invoice(number, cart, discount_pct=0):
    lines = [f"Invoice {number}"]
    for sku, (unit, qty) in sorted(cart.lines.items()):
        lines.append(f"{sku:<10} {qty:>3} x {utils.format_money(unit)}")
    if discount_pct:
        lines.append(f"Discount: {discount_pct}%")
    total = utils.calc_total(list(cart.lines.values()), cart.tax_rate, discount_pct)
    lines.append(f"Total: {utils.format_money(total)}")
    return "\n".join(lines)
