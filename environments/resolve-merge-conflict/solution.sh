#!/bin/bash
set -euo pipefail
cat > convert.py <<'PY'
"""Unit conversion for the lab's data pipeline."""

from collections import deque

# (a, b): f means 1 a == f b
FACTORS = {
    ("km", "m"): 1000.0,
    ("m", "cm"): 100.0,
    ("m", "mm"): 1000.0,
    ("mi", "km"): 1.609344,
    ("ft", "m"): 0.3048,
    ("kg", "g"): 1000.0,
    ("lb", "kg"): 0.45359237,
}

TEMPERATURES = ("C", "F", "K")


def _to_kelvin(value, unit):
    if unit == "C":
        return value + 273.15
    if unit == "F":
        return (value - 32) * 5 / 9 + 273.15
    return float(value)


def _from_kelvin(value, unit):
    if unit == "C":
        return value - 273.15
    if unit == "F":
        return (value - 273.15) * 9 / 5 + 32
    return value


def _edges():
    graph = {}
    for (a, b), f in FACTORS.items():
        graph.setdefault(a, []).append((b, f))
        graph.setdefault(b, []).append((a, 1.0 / f))
    return graph


def convert(value, src, dst):
    """Convert ``value`` from unit ``src`` to unit ``dst``. Temperatures (``C``, ``F``,
    ``K``) are converted through kelvin, since they are not plain factors; other units
    chain through known factors (``km`` -> ``m`` -> ``cm``) when there is no direct one."""
    if src == dst:
        return float(value)
    if src in TEMPERATURES and dst in TEMPERATURES:
        return _from_kelvin(_to_kelvin(value, src), dst)
    graph = _edges()
    seen = {src: 1.0}
    queue = deque([src])
    while queue:
        unit = queue.popleft()
        for nxt, f in graph.get(unit, []):
            if nxt not in seen:
                seen[nxt] = seen[unit] * f
                if nxt == dst:
                    return value * seen[nxt]
                queue.append(nxt)
    raise ValueError(f"no conversion path from {src} to {dst}")
PY
cat > README.md <<'MD'
# labunits

Small unit conversions for the lab's data pipeline.

```python
from convert import convert
convert(2.5, "km", "m")   # 2500.0
convert(1, "mi", "cm")    # 160934.4, chained through km and m
convert(100, "C", "F")    # 212.0
```

## Supported units

- length: `km`, `m`, `cm`, `mm`, `mi`, `ft`
- mass: `kg`, `g`, `lb`
- temperature: `C`, `F`, `K` (converted through kelvin)

Conversions chain through known factors, so any two units of the same kind convert.
Converting between units with no path between them raises `ValueError`.
MD
python3 -m pytest -q -p no:cacheprovider
git add README.md convert.py
git commit -q --no-edit
git log --oneline --graph -5
