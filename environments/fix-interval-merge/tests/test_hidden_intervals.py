import pytest
from intervals import contains, merge, total_length


@pytest.mark.parametrize(
    "given, expected",
    [
        ([], []),
        ([(5, 5)], [(5, 5)]),
        ([(1, 4), (3, 8)], [(1, 8)]),
        ([(1, 2), (5, 6)], [(1, 2), (5, 6)]),
        ([(10, 12), (1, 3), (2, 5)], [(1, 5), (10, 12)]),
        ([(1, 3), (4, 6)], [(1, 6)]),
        ([(4, 6), (1, 3)], [(1, 6)]),
        ([(1, 10), (2, 3)], [(1, 10)]),
        ([(1, 10), (2, 3), (11, 11)], [(1, 11)]),
        ([(-5, -1), (0, 0), (2, 4)], [(-5, 0), (2, 4)]),
        ([(1, 3), (1, 3)], [(1, 3)]),
        ([(7, 9), (1, 2), (3, 4), (12, 15), (10, 10)], [(1, 4), (7, 10), (12, 15)]),
        ([(0, 100), (50, 60), (99, 200), (300, 301)], [(0, 200), (300, 301)]),
    ],
)
def test_merge(given, expected):
    assert merge(given) == expected


def test_merge_does_not_modify_input():
    given = [(10, 12), (1, 3), (2, 5)]
    copy = list(given)
    merge(given)
    assert given == copy


def test_merge_accepts_any_iterable():
    assert merge(iter([(3, 4), (1, 2)])) == [(1, 4)]


@pytest.mark.parametrize(
    "given, expected",
    [
        ([], 0),
        ([(1, 3)], 3),
        ([(5, 5)], 1),
        ([(1, 4), (3, 8), (20, 20)], 9),
        ([(1, 10), (2, 3)], 10),
        ([(-2, 2)], 5),
        ([(1, 3), (4, 6)], 6),
    ],
)
def test_total_length(given, expected):
    assert total_length(given) == expected


def test_contains():
    spans = [(7, 9), (1, 3)]
    assert contains(spans, 1) and contains(spans, 3) and contains(spans, 8)
    assert not contains(spans, 0)
    assert not contains(spans, 5)
    assert not contains([], 0)
    assert contains([(1, 10), (2, 3)], 10)
