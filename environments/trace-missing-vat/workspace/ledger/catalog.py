"""Net unit prices in cents."""

PRICES = {
    "KB-01": 4990,  # keyboard
    "MS-02": 2450,  # mouse
    "MN-27": 21900,  # 27" monitor
    "CB-05": 899,  # USB-C cable
    "DK-10": 13999,  # docking station
    "HS-03": 7900,  # headset
}


def unit_price(sku):
    try:
        return PRICES[sku]
    except KeyError:
        raise KeyError(f"unknown SKU {sku!r}") from None
