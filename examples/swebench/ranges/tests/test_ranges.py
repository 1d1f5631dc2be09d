from ranges import span


def test_span(bounds):
    assert span(list(bounds)) == 10
