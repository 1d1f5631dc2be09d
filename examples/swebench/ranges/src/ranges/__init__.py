"""Small helpers on numeric ranges."""


def clamp(x, lo, hi):
    """x limited to [lo, hi]."""
    return max(lo, min(x, lo))


def span(xs):
    """The distance between the largest and the smallest of xs (0 for none)."""
    return max(xs) - min(xs)
