#!/bin/bash
set -euo pipefail
cat > durations.py <<'PY'
"""Human-friendly durations for the scheduler's config (see the task description)."""

import re
from fractions import Fraction

_UNITS = [
    (86400, ("d", "day", "days")),
    (3600, ("h", "hr", "hrs", "hour", "hours")),
    (60, ("m", "min", "mins", "minute", "minutes")),
    (1, ("s", "sec", "secs", "second", "seconds")),
]
_UNIT_OF = {name: size for size, names in _UNITS for name in names}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")
_GAP = re.compile(r"\s*,\s*|\s+")


def parse_duration(text):
    """Parse ``text`` into a whole number of seconds."""
    if not isinstance(text, str):
        raise TypeError("duration must be a string, not %s" % type(text).__name__)
    s = text.strip().lower()
    if not s:
        raise ValueError("empty duration")
    if re.fullmatch(r"\d+", s):
        return int(s)
    if ":" in s:
        m = re.fullmatch(r"(\d+)((?::\d\d){1,2})", s)
        if not m:
            raise ValueError("malformed clock value: %r" % text)
        rest = [int(x) for x in m.group(2)[1:].split(":")]
        if any(x >= 60 for x in rest):
            raise ValueError("clock field out of range: %r" % text)
        total = int(m.group(1))
        for x in rest:
            total = total * 60 + x
        return total
    pos, total, last = 0, Fraction(0), None
    while True:
        m = _PART.match(s, pos)
        if not m or m.group(2) not in _UNIT_OF:
            raise ValueError("bad duration: %r" % text)
        size = _UNIT_OF[m.group(2)]
        if last is not None and size >= last:
            raise ValueError("units repeated or out of order: %r" % text)
        last = size
        total += Fraction(m.group(1)) * size
        pos = m.end()
        if pos == len(s):
            break
        sep = _GAP.match(s, pos)
        if sep:
            pos = sep.end()
        elif not s[pos].isdigit():
            raise ValueError("bad duration: %r" % text)
    if total.denominator != 1:
        raise ValueError("not a whole number of seconds: %r" % text)
    return int(total)


def format_duration(seconds):
    """The canonical text for a whole number of seconds, e.g. ``"1h 1m 1s"``."""
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise TypeError("seconds must be an int")
    if seconds < 0:
        raise ValueError("negative duration")
    parts = []
    for size, names in _UNITS:
        n, seconds = divmod(seconds, size)
        if n:
            parts.append("%d%s" % (n, names[0]))
    return " ".join(parts) or "0s"
PY
