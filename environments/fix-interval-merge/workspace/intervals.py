"""Helpers for closed integer intervals.

An interval is a ``(start, end)`` tuple of ints with ``start <= end``; both ends are
included, so ``(3, 5)`` covers 3, 4 and 5.
"""


def merge(intervals):
    """Merge overlapping or adjacent intervals.

    Two intervals are merged when they share at least one integer or when they are
    adjacent (``(1, 3)`` and ``(4, 6)`` cover consecutive integers and become ``(1, 6)``).
    The input may be in any order and is not modified; the result is a new list of
    disjoint, non-adjacent intervals sorted by start.
    """
    merged = []
    for start, end in intervals:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def total_length(intervals):
    """How many integers the union of the intervals covers."""
    return sum(end - start for start, end in merge(intervals))


def contains(intervals, value):
    """Whether ``value`` lies in any of the intervals."""
    return any(start <= value <= end for start, end in merge(intervals))
