"""A shopping cart."""

from shop.utils import calc_total


class Cart:
    def __init__(self, tax_rate=0.0):
        self.tax_rate = tax_rate
        self.lines = {}  # sku -> [unit_cents, quantity]

    def add(self, sku, unit_cents, quantity=1):
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        line = self.lines.setdefault(sku, [unit_cents, 0])
        line[1] += quantity

    def remove(self, sku):
        self.lines.pop(sku, None)

    def total(self, discount_pct=0):
        items = [(unit, qty) for unit, qty in self.lines.values()]
        return calc_total(items, self.tax_rate, discount_pct)
