"""compare_csv.py ACTUAL EXPECTED: same header and same rows, in order (CSV parsed, so
quoting and line endings do not matter)."""

import csv
import sys


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        return [row for row in csv.reader(f) if row]


actual_path, expected_path = sys.argv[1], sys.argv[2]
try:
    actual = read(actual_path)
except (OSError, UnicodeDecodeError, csv.Error) as e:
    sys.exit(f"cannot read {actual_path}: {e}")
expected = read(expected_path)
if not actual or actual[0] != expected[0]:
    sys.exit(f"header is {actual[0] if actual else None}, expected {expected[0]}")
got, want = actual[1:], expected[1:]
extra = [r for r in got if r not in want]
missing = [r for r in want if r not in got]
print(f"{len(got)} rows, expected {len(want)}; {len(extra)} unexpected, {len(missing)} missing")
for r in extra[:5]:
    print("unexpected:", r)
for r in missing[:5]:
    print("missing:   ", r)
if extra or missing:
    sys.exit(1)
if got != want:
    sys.exit("the right rows, in the wrong order (sort by id)")
print("ok")
