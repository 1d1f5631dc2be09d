import pytest


@pytest.fixture
def bounds():
    return (0, 10)
