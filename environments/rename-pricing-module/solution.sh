#!/bin/bash
set -euo pipefail
mv shop/utils.py shop/pricing.py
sed -i 's/\bcalc_total\b/compute_total/g' shop/pricing.py shop/cart.py shop/invoice.py shop/report.py tests/test_shop.py
sed -i 's/from shop\.utils import/from shop.pricing import/' shop/cart.py shop/report.py tests/test_shop.py
sed -i 's/from shop import utils/from shop import pricing/; s/\butils\./pricing./g' shop/invoice.py
rm -rf shop/__pycache__ tests/__pycache__
python3 -m pytest -q
