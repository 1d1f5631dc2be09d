import copy
import json

import pytest
from config_check import validate

GOOD = {
    "service": {"name": "billing-api", "port": 8080, "workers": 4, "debug": False},
    "database": {"url": "postgres://db.internal/billing", "pool_size": 10, "timeout_s": 2.5},
    "features": ["invoices", "dunning"],
    "limits": {"max_body": 1048576, "burst": 0},
}


def with_changes(**changes):
    """GOOD with dotted-path changes; a value of ... deletes the key."""
    cfg = copy.deepcopy(GOOD)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = cfg
        for p in parents:
            node = node[p]
        if value is ...:
            del node[last]
        else:
            node[last] = value
    return cfg


def test_good_config():
    assert validate(copy.deepcopy(GOOD)) == []


def test_minimal_config():
    assert (
        validate({"service": {"name": "ab", "port": 1}, "database": {"url": "sqlite:///x.db"}})
        == []
    )


def test_example_bad_file():
    with open("examples/bad.json") as f:
        cfg = json.load(f)
    assert validate(cfg) == [
        ("database.pool_size", "range"),
        ("database.url", "missing"),
        ("extra", "unknown"),
        ("features[1]", "duplicate"),
        ("service.colour", "unknown"),
        ("service.name", "pattern"),
        ("service.port", "range"),
    ]


@pytest.mark.parametrize("value", [[], "x", 3, None, True])
def test_top_level_type(value):
    assert validate(value) == [("", "type")]


def test_empty_object():
    assert validate({}) == [("database", "missing"), ("service", "missing")]


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"service": ...}, [("service", "missing")]),
        ({"service": []}, [("service", "type")]),
        ({"service__name": ...}, [("service.name", "missing")]),
        ({"service__port": ...}, [("service.port", "missing")]),
        ({"service__name": "a"}, [("service.name", "pattern")]),
        ({"service__name": "9lives"}, [("service.name", "pattern")]),
        ({"service__name": "a" * 32}, [("service.name", "pattern")]),
        ({"service__name": "a" * 31}, []),
        ({"service__name": 42}, [("service.name", "type")]),
        ({"service__port": 0}, [("service.port", "range")]),
        ({"service__port": 65535}, []),
        ({"service__port": 65536}, [("service.port", "range")]),
        ({"service__port": "8080"}, [("service.port", "type")]),
        ({"service__port": True}, [("service.port", "type")]),
        ({"service__port": 80.0}, [("service.port", "type")]),
        ({"service__workers": 0}, [("service.workers", "range")]),
        ({"service__workers": 64}, []),
        ({"service__workers": 65}, [("service.workers", "range")]),
        ({"service__debug": "yes"}, [("service.debug", "type")]),
        ({"service__debug": 1}, [("service.debug", "type")]),
        ({"service__colour": "blue"}, [("service.colour", "unknown")]),
    ],
)
def test_service(changes, expected):
    assert validate(with_changes(**changes)) == expected


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"database": ...}, [("database", "missing")]),
        ({"database": "postgres://x"}, [("database", "type")]),
        ({"database__url": ...}, [("database.url", "missing")]),
        ({"database__url": "mysql://x"}, [("database.url", "pattern")]),
        ({"database__url": "sqlite://x.db"}, [("database.url", "pattern")]),
        ({"database__url": "sqlite:///x.db"}, []),
        ({"database__url": None}, [("database.url", "type")]),
        ({"database__pool_size": 101}, [("database.pool_size", "range")]),
        ({"database__pool_size": 1}, []),
        ({"database__pool_size": 5.5}, [("database.pool_size", "type")]),
        ({"database__timeout_s": 0}, [("database.timeout_s", "range")]),
        ({"database__timeout_s": -1.5}, [("database.timeout_s", "range")]),
        ({"database__timeout_s": 30}, []),
        ({"database__timeout_s": 0.001}, []),
        ({"database__timeout_s": False}, [("database.timeout_s", "type")]),
        ({"database__timeout_s": "2"}, [("database.timeout_s", "type")]),
        ({"database__host": "x"}, [("database.host", "unknown")]),
    ],
)
def test_database(changes, expected):
    assert validate(with_changes(**changes)) == expected


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"features": ...}, []),
        ({"features": []}, []),
        ({"features": "invoices"}, [("features", "type")]),
        ({"features": {"invoices": True}}, [("features", "type")]),
        (
            {"features": ["ok", 3, "Bad-One", "ok", "fine_too"]},
            [("features[1]", "type"), ("features[2]", "pattern"), ("features[3]", "duplicate")],
        ),
        (
            {"features": ["a", "a", "a"]},
            [("features[1]", "duplicate"), ("features[2]", "duplicate")],
        ),
        ({"features": ["x"] * 12}, [(f"features[{i}]", "duplicate") for i in range(1, 12)]),
        ({"features": [""]}, [("features[0]", "pattern")]),
    ],
)
def test_features(changes, expected):
    assert validate(with_changes(**changes)) == sorted(expected)


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"limits": ...}, []),
        ({"limits": {}}, []),
        ({"limits": {"anything-goes": 5, "Z": 0}}, []),
        ({"limits": [1, 2]}, [("limits", "type")]),
        (
            {"limits": {"a": -1, "b": 1.5, "c": "3", "d": True}},
            [
                ("limits.a", "range"),
                ("limits.b", "type"),
                ("limits.c", "type"),
                ("limits.d", "type"),
            ],
        ),
    ],
)
def test_limits(changes, expected):
    assert validate(with_changes(**changes)) == expected


def test_many_problems_sorted():
    cfg = {
        "zzz": 1,
        "service": {"name": "X", "port": -1, "workers": "2", "debug": None, "aaa": 0},
        "database": {"url": "ftp://x", "timeout_s": 0},
        "features": ["b", "b"],
        "limits": {"q": -5},
    }
    assert validate(cfg) == [
        ("database.timeout_s", "range"),
        ("database.url", "pattern"),
        ("features[1]", "duplicate"),
        ("limits.q", "range"),
        ("service.aaa", "unknown"),
        ("service.debug", "type"),
        ("service.name", "pattern"),
        ("service.port", "range"),
        ("service.workers", "type"),
        ("zzz", "unknown"),
    ]


def test_returns_list_of_tuples():
    result = validate({"service": {"name": "ab", "port": 1}})
    assert result == [("database", "missing")]
    assert isinstance(result, list) and isinstance(result[0], tuple)


def test_input_not_modified():
    cfg = copy.deepcopy(GOOD)
    cfg["service"]["port"] = 0
    before = copy.deepcopy(cfg)
    validate(cfg)
    assert cfg == before
