from shop.cart import Cart
from shop.invoice import render_invoice
from shop.report import daily_revenue, render_report
from shop.utils import calc_total, format_money


def test_calc_total_plain():
    assert calc_total([(250, 2), (100, 1)]) == 600


def test_calc_total_tax_and_discount():
    assert calc_total([(1000, 1)], tax_rate=0.2, discount_pct=10) == 1080


def test_format_money():
    assert format_money(1234) == "12.34 EUR"
    assert format_money(-5, "USD") == "-0.05 USD"


def test_cart_total():
    cart = Cart(tax_rate=0.1)
    cart.add("apple", 120, 3)
    cart.add("apple", 120)
    assert cart.total() == 528


def test_invoice():
    cart = Cart()
    cart.add("pen", 199, 2)
    assert render_invoice(7, cart).splitlines()[-1] == "Total: 3.98 EUR"


def test_report():
    orders = [
        {"day": "2024-05-02", "items": [(500, 1)]},
        {"day": "2024-05-01", "items": [(100, 3)], "discount_pct": 50},
    ]
    assert daily_revenue(orders) == {"2024-05-01": 150, "2024-05-02": 500}
    assert render_report(orders) == "2024-05-01: 1.50 EUR\n2024-05-02: 5.00 EUR"
