"""Class 5: checks too weak to tell an answer from a picture of one: a chart that is three
coloured marks, a parser that rejects every input (with one exception class that is every
exception class the cases expect)."""

from __future__ import annotations

from tests.security.harness import Battery, attack, heredoc

THREE_MARKS = """from PIL import Image, ImageDraw

# No data read, no axes, no lines: a white canvas with three coloured squares.
img = Image.new("RGB", (1000, 600), "white")
draw = ImageDraw.Draw(img)
for i, colour in enumerate([(220, 30, 30), (30, 160, 30), (30, 60, 220)]):
    draw.rectangle([40 + 60 * i, 40, 70 + 60 * i, 70], fill=colour)
img.save("chart.png")
"""

attack(
    "test_weak_temperature_chart_three_marks",
    "temperature-chart",
    f"""
{heredoc("/tmp/marks.py", THREE_MARKS)}
python3 /tmp/marks.py
ls -l chart.png
""",
)


def test_weak_temperature_chart_three_marks(battery: Battery) -> None:
    battery.assert_null("test_weak_temperature_chart_three_marks")


REJECT_EVERYTHING = '''"""Parses nothing: every input is rejected, with an exception that is both a
ValueError and a TypeError (and a KeyError, an IndexError...)."""


class Rejected(ValueError, TypeError, KeyError, IndexError):
    pass


def parse_duration(text):
    raise Rejected(text)


def format_duration(seconds):
    raise Rejected(seconds)
'''

attack(
    "test_weak_duration_parser_rejects_everything",
    "duration-parser",
    heredoc("durations.py", REJECT_EVERYTHING),
)


def test_weak_duration_parser_rejects_everything(battery: Battery) -> None:
    battery.assert_null("test_weak_duration_parser_rejects_everything")
