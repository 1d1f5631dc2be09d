#!/bin/bash
# Rebuilds repo.tar: a git repository stopped in the middle of a conflicting merge.
# Deterministic (fixed dates and identities). Not part of the image; run from this folder.
set -euo pipefail
out="$(pwd)/repo.tar"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
export GIT_CONFIG_NOSYSTEM=1 HOME="$tmp"
git init -q -b main --template= .
git config user.name "Dana Lab"
git config user.email "dana@lab.example"
git config core.autocrlf false
git config init.defaultBranch main
n=0
commit() {  # commit MESSAGE: with a fixed date that advances each time
    n=$((n + 1))
    GIT_AUTHOR_DATE="2024-04-0${n}T10:00:00Z" GIT_COMMITTER_DATE="2024-04-0${n}T10:00:00Z" \
        git commit -q -m "$1"
}

cat > .gitignore <<'EOF'
__pycache__/
.pytest_cache/
EOF
cat > README.md <<'EOF'
# labunits

Small unit conversions for the lab's data pipeline.

```python
from convert import convert
convert(2.5, "km", "m")   # 2500.0
```

## Supported units

- length: `km`, `m`, `cm`, `mm`
- mass: `kg`, `g`

Converting between units that have no known relation raises `ValueError`.
EOF
cat > convert.py <<'EOF'
"""Unit conversion for the lab's data pipeline."""

# (a, b): f means 1 a == f b
FACTORS = {
    ("km", "m"): 1000.0,
    ("m", "cm"): 100.0,
    ("m", "mm"): 1000.0,
    ("kg", "g"): 1000.0,
}


def convert(value, src, dst):
    """Convert ``value`` from unit ``src`` to unit ``dst``."""
    if src == dst:
        return float(value)
    if (src, dst) in FACTORS:
        return value * FACTORS[(src, dst)]
    if (dst, src) in FACTORS:
        return value / FACTORS[(dst, src)]
    raise ValueError(f"cannot convert {src} to {dst}")
EOF
cat > test_convert.py <<'EOF'
import pytest

from convert import convert


def test_same_unit():
    assert convert(3, "m", "m") == 3.0


def test_direct():
    assert convert(2.5, "km", "m") == 2500.0
    assert convert(250, "cm", "m") == 2.5
    assert convert(1500, "g", "kg") == 1.5


def test_unknown():
    with pytest.raises(ValueError):
        convert(1, "kg", "m")
EOF
git add -A
commit "labunits: direct conversions"

git checkout -q -b feature/chain-conversions
cat > convert.py <<'EOF'
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


def _edges():
    graph = {}
    for (a, b), f in FACTORS.items():
        graph.setdefault(a, []).append((b, f))
        graph.setdefault(b, []).append((a, 1.0 / f))
    return graph


def convert(value, src, dst):
    """Convert ``value`` from unit ``src`` to unit ``dst``, chaining known factors
    (``km`` -> ``m`` -> ``cm``) when there is no direct one."""
    if src == dst:
        return float(value)
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
EOF
cat > test_chain.py <<'EOF'
import pytest

from convert import convert


def test_chain_two_steps():
    assert convert(1.2, "km", "cm") == pytest.approx(120000.0)
    assert convert(5, "mm", "km") == pytest.approx(5e-06)


def test_imperial():
    assert convert(1, "mi", "m") == pytest.approx(1609.344)
    assert convert(10, "ft", "cm") == pytest.approx(304.8)
    assert convert(2, "lb", "g") == pytest.approx(907.18474)


def test_no_path():
    with pytest.raises(ValueError, match="no conversion path"):
        convert(1, "lb", "ft")
EOF
cat > README.md <<'EOF'
# labunits

Small unit conversions for the lab's data pipeline.

```python
from convert import convert
convert(2.5, "km", "m")   # 2500.0
convert(1, "mi", "cm")    # 160934.4, chained through km and m
```

## Supported units

- length: `km`, `m`, `cm`, `mm`, `mi`, `ft`
- mass: `kg`, `g`, `lb`

Conversions chain through known factors, so any two units of the same kind convert.
Converting between units with no path between them raises `ValueError`.
EOF
git add -A
commit "Chain conversions through known factors; add imperial units"

git checkout -q main
cat > convert.py <<'EOF'
"""Unit conversion for the lab's data pipeline."""

# (a, b): f means 1 a == f b
FACTORS = {
    ("km", "m"): 1000.0,
    ("m", "cm"): 100.0,
    ("m", "mm"): 1000.0,
    ("kg", "g"): 1000.0,
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


def convert(value, src, dst):
    """Convert ``value`` from unit ``src`` to unit ``dst``. Temperatures (``C``, ``F``,
    ``K``) are converted through kelvin, since they are not plain factors."""
    if src == dst:
        return float(value)
    if src in TEMPERATURES and dst in TEMPERATURES:
        return _from_kelvin(_to_kelvin(value, src), dst)
    if (src, dst) in FACTORS:
        return value * FACTORS[(src, dst)]
    if (dst, src) in FACTORS:
        return value / FACTORS[(dst, src)]
    raise ValueError(f"cannot convert {src} to {dst}")
EOF
cat > test_temperature.py <<'EOF'
import pytest

from convert import convert


def test_celsius_fahrenheit():
    assert convert(100, "C", "F") == pytest.approx(212.0)
    assert convert(-40, "F", "C") == pytest.approx(-40.0)


def test_kelvin():
    assert convert(0, "K", "C") == pytest.approx(-273.15)
    assert convert(32, "F", "K") == pytest.approx(273.15)


def test_temperature_and_length_do_not_mix():
    with pytest.raises(ValueError):
        convert(1, "C", "m")
EOF
cat > README.md <<'EOF'
# labunits

Small unit conversions for the lab's data pipeline.

```python
from convert import convert
convert(2.5, "km", "m")   # 2500.0
convert(100, "C", "F")    # 212.0
```

## Supported units

- length: `km`, `m`, `cm`, `mm`
- mass: `kg`, `g`
- temperature: `C`, `F`, `K` (converted through kelvin)

Converting between units that have no known relation raises `ValueError`.
EOF
git add -A
commit "Temperature conversions (C, F, K)"

GIT_AUTHOR_DATE="2024-04-09T10:00:00Z" GIT_COMMITTER_DATE="2024-04-09T10:00:00Z" \
    git merge --no-ff feature/chain-conversions >/dev/null 2>&1 && { echo "expected a conflict" >&2; exit 1; }
git status --short
echo "main: $(git rev-parse main)  feature: $(git rev-parse feature/chain-conversions)"
tar --sort=name --mtime=2024-04-09T10:00:00Z --owner=0 --group=0 --numeric-owner -cf "$out" .
