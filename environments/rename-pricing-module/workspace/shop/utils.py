"""Money helpers. Amounts are integers in cents to avoid float rounding."""

from decimal import ROUND_HALF_UP, Decimal


def calc_total(items, tax_rate=0.0, discount_pct=0):
    """Total in cents of ``items`` (``(unit_cents, quantity)`` pairs), after an optional
    percentage discount and then tax at ``tax_rate`` (e.g. ``0.2`` for 20 %), rounded half
    up to the cent."""
    subtotal = sum(unit * qty for unit, qty in items)
    discounted = Decimal(subtotal) * (100 - Decimal(discount_pct)) / 100
    taxed = discounted * (1 + Decimal(str(tax_rate)))
    return int(taxed.quantize(Decimal("1"), rounding=ROUND_HALF_UP))


def format_money(cents, currency="EUR"):
    """``1234`` → ``"12.34 EUR"``; negative amounts keep their sign."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d} {currency}"
