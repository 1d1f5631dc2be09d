"""Order ledger: load the shop's order export, price orders, print customer statements."""
