"""python3 statement.py ORDERS.csv CUSTOMER [YYYY-MM]: print a customer statement."""

import sys

from ledger.loader import load_orders
from ledger.statements import customer_statement

if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    month = sys.argv[3] if len(sys.argv) == 4 else None
    print(customer_statement(load_orders(sys.argv[1]), sys.argv[2], month))
