"""A tiny shop: carts, invoices and a sales report."""
