"""VAT by destination. Shipments outside the EU VAT area (and the UK) are zero-rated."""

from ledger.regions import canonical_region

VAT_PERCENT = {"DE": 19, "AT": 20, "FR": 20, "NL": 21, "GB": 20}


def vat_percent(region):
    """VAT rate in percent for shipments to ``region`` (any spelling the export uses)."""
    return VAT_PERCENT.get(canonical_region(region), 0)
