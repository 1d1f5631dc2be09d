"""Human-friendly durations for the scheduler's config (see the task description)."""


def parse_duration(text):
    """Parse ``text`` into a whole number of seconds."""
    raise NotImplementedError


def format_duration(seconds):
    """The canonical text for a whole number of seconds, e.g. ``"1h 1m 1s"``."""
    raise NotImplementedError
