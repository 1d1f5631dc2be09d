import pytest
from durations import format_duration, parse_duration


@pytest.mark.parametrize(
    "text, expected",
    [
        ("90", 90),
        ("0", 0),
        ("  45  ", 45),
        ("1:30", 90),
        ("0:59", 59),
        ("2:05:09", 7509),
        ("10:00:00", 36000),
        ("125:00", 7500),
    ],
)
def test_bare_and_clock(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1h30m", 5400),
        ("2d 4h", 187200),
        ("45s", 45),
        ("1.5 hours", 5400),
        ("3 days, 20 minutes", 260400),
        ("1H 2M 3S", 3723),
        ("1 hr 1 min 1 sec", 3661),
        ("2hrs,5mins", 7500),
        ("1 day 1 hour 1 minute 1 second", 90061),
        ("0.25d", 21600),
        ("1.5m", 90),
        ("10 Seconds", 10),
        ("  7m  ", 420),
        ("1d , 2s", 86402),
    ],
)
def test_unit_form(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "-5",
        "-5m",
        "5x",
        "1h 30",
        "1h 1h",
        "1m 2min",
        "30m 1h",
        "1.5s",
        "1:5",
        "1:60",
        "1:02:03:04",
        "1:0a",
        "h",
        "1h and 2m",
        "1.2.3h",
        "1h,,2m",
        ".5h",
    ],
)
def test_invalid(text):
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize("value", [None, 90, 1.5, b"1h"])
def test_parse_type_error(value):
    with pytest.raises(TypeError):
        parse_duration(value)


@pytest.mark.parametrize(
    "seconds, expected",
    [
        (0, "0s"),
        (59, "59s"),
        (60, "1m"),
        (3661, "1h 1m 1s"),
        (90000, "1d 1h"),
        (86400 * 3 + 5, "3d 5s"),
        (7200, "2h"),
    ],
)
def test_format(seconds, expected):
    assert format_duration(seconds) == expected


def test_format_negative():
    with pytest.raises(ValueError):
        format_duration(-1)


@pytest.mark.parametrize("value", [1.0, "60", True, None])
def test_format_type_error(value):
    with pytest.raises(TypeError):
        format_duration(value)


def test_round_trip():
    for n in [*list(range(0, 200)), 3599, 3600, 3601, 86399, 86400, 90061, 10**7]:
        assert parse_duration(format_duration(n)) == n
