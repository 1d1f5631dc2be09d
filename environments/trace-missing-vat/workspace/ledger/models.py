from dataclasses import dataclass, field


@dataclass
class Line:
    sku: str
    qty: int


@dataclass
class Order:
    order_id: int
    customer: str
    region: str  # as written in the export; see ledger.regions
    day: str  # YYYY-MM-DD
    lines: list = field(default_factory=list)


@dataclass
class Totals:
    net: int  # cents
    vat: int
    gross: int
