#!/bin/bash
set -euo pipefail
cat > monthly_revenue.sql <<'SQL'
SELECT substr(o.ordered_at, 1, 7)                          AS month,
       p.category                                          AS category,
       COUNT(DISTINCT o.id)                                AS orders,
       SUM(i.quantity)                                     AS units,
       ROUND(SUM(i.quantity * i.unit_price_cents) / 100.0, 2) AS revenue
FROM orders o
JOIN order_items i ON i.order_id = o.id
JOIN products p ON p.id = i.product_id
WHERE o.status IN ('paid', 'shipped')
  AND o.ordered_at >= '2024-01-01' AND o.ordered_at < '2025-01-01'
GROUP BY month, category
ORDER BY month, revenue DESC, category;
SQL
cat > top_customers.sql <<'SQL'
SELECT c.name                                              AS name,
       c.country                                           AS country,
       COUNT(DISTINCT o.id)                                AS orders,
       ROUND(SUM(i.quantity * i.unit_price_cents) / 100.0, 2) AS revenue
FROM orders o
JOIN customers c ON c.id = o.customer_id
JOIN order_items i ON i.order_id = o.id
WHERE o.status IN ('paid', 'shipped')
  AND o.ordered_at >= '2024-01-01' AND o.ordered_at < '2025-01-01'
GROUP BY c.id
ORDER BY revenue DESC, name
LIMIT 5;
SQL
python3 - <<'PY'
import sqlite3
db = sqlite3.connect("shop.db")
for f in ("monthly_revenue.sql", "top_customers.sql"):
    rows = db.execute(open(f).read()).fetchall()
    print(f, len(rows), rows[:3])
PY
