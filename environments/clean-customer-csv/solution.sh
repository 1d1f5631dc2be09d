#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import csv
import re
from datetime import datetime

FORMATS = ["%Y-%m-%d", "%Y/%m/%d", "%d/%m/%Y", "%d.%m.%Y", "%b %d, %Y", "%B %d, %Y"]
SHAPES = [r"\d{4}-\d\d-\d\d", r"\d{4}/\d\d/\d\d", r"\d\d/\d\d/\d{4}", r"\d\d\.\d\d\.\d{4}",
          r"[A-Za-z]+ \d{1,2}, \d{4}", r"[A-Za-z]+ \d{1,2}, \d{4}"]
EMAIL = re.compile(r"[^@\s]+@[^@\s.]+(\.[^@\s.]+)+")


def parse_date(s):
    for fmt, shape in zip(FORMATS, SHAPES):
        if re.fullmatch(shape, s):
            try:
                return datetime.strptime(s, fmt).date()
            except ValueError:
                pass
    return None


best = {}
with open("customers_raw.csv", newline="", encoding="utf-8") as f:
    reader = csv.reader(f)
    header = next(reader)
    for row in reader:
        if len(row) != 5:
            continue
        rid, name, email, day, country = (x.strip() for x in row)
        name = re.sub(r"\s+", " ", name)
        email = email.lower()
        if not re.fullmatch(r"\d+", rid) or int(rid) <= 0 or not name:
            continue
        if not EMAIL.fullmatch(email):
            continue
        d = parse_date(day)
        if d is None or not re.fullmatch(r"[A-Za-z]{2}", country):
            continue
        rec = (d, int(rid), name, email, country.upper())
        if email not in best or rec[:2] < best[email][:2]:
            best[email] = rec

with open("customers_clean.csv", "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(header)
    for d, rid, name, email, country in sorted(best.values(), key=lambda r: r[1]):
        w.writerow([rid, name, email, d.isoformat(), country])
PY
wc -l customers_clean.csv
