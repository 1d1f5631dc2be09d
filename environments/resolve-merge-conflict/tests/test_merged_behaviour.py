import pytest
from convert import convert


def test_same_unit():
    assert convert(3, "m", "m") == 3.0
    assert convert(0, "C", "C") == 0.0


def test_direct():
    assert convert(2.5, "km", "m") == pytest.approx(2500.0)
    assert convert(250, "cm", "m") == pytest.approx(2.5)
    assert convert(1500, "g", "kg") == pytest.approx(1.5)


def test_chain():
    assert convert(1.2, "km", "cm") == pytest.approx(120000.0)
    assert convert(5, "mm", "km") == pytest.approx(5e-06)
    assert convert(1, "mi", "cm") == pytest.approx(160934.4)
    assert convert(10, "ft", "cm") == pytest.approx(304.8)
    assert convert(2, "lb", "g") == pytest.approx(907.18474)
    assert convert(1000, "g", "lb") == pytest.approx(2.2046226218)


def test_temperature():
    assert convert(100, "C", "F") == pytest.approx(212.0)
    assert convert(-40, "F", "C") == pytest.approx(-40.0)
    assert convert(0, "K", "C") == pytest.approx(-273.15)
    assert convert(32, "F", "K") == pytest.approx(273.15)
    assert convert(300, "K", "F") == pytest.approx(80.33)


@pytest.mark.parametrize(
    "src, dst", [("kg", "m"), ("lb", "ft"), ("C", "m"), ("mi", "K"), ("x", "y")]
)
def test_no_conversion(src, dst):
    with pytest.raises(ValueError):
        convert(1, src, dst)


def test_no_path_message():
    with pytest.raises(ValueError, match="no conversion path"):
        convert(1, "lb", "ft")
