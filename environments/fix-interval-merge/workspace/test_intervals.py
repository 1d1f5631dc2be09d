from intervals import contains, merge, total_length


def test_merge_overlapping():
    assert merge([(1, 4), (3, 8)]) == [(1, 8)]


def test_merge_keeps_separate_intervals():
    assert merge([(1, 2), (5, 6)]) == [(1, 2), (5, 6)]


def test_merge_unsorted_input():
    assert merge([(10, 12), (1, 3), (2, 5)]) == [(1, 5), (10, 12)]


def test_merge_adjacent():
    assert merge([(1, 3), (4, 6)]) == [(1, 6)]


def test_total_length():
    assert total_length([(1, 3)]) == 3
    assert total_length([(1, 4), (3, 8), (20, 20)]) == 9


def test_contains():
    assert contains([(1, 3), (7, 9)], 8)
    assert not contains([(1, 3), (7, 9)], 5)
