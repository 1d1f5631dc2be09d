#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import re
path = "intervals.py"
src = open(path).read()
old_merge = src[src.index("    merged = []"):src.index("    return merged") + len("    return merged")]
new_merge = '''    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged'''
src = src.replace(old_merge, new_merge)
src = src.replace("sum(end - start for", "sum(end - start + 1 for")
open(path, "w").write(src)
PY
python3 -m pytest -q test_intervals.py
