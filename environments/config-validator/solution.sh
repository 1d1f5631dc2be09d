#!/bin/bash
set -euo pipefail
cat > config_check.py <<'PY'
"""Validate a service config (see validate()); `python3 config_check.py FILE` checks a file."""

import json
import re
import sys

NAME = re.compile(r"[a-z][a-z0-9-]{1,30}")
FEATURE = re.compile(r"[a-z_]+")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _int_in(lo, hi=None):
    def check(v, path, errors):
        if not _is_int(v):
            errors.append((path, "type"))
        elif v < lo or (hi is not None and v > hi):
            errors.append((path, "range"))
    return check


def _string(ok):
    def check(v, path, errors):
        if not isinstance(v, str):
            errors.append((path, "type"))
        elif not ok(v):
            errors.append((path, "pattern"))
    return check


def _boolean(v, path, errors):
    if not isinstance(v, bool):
        errors.append((path, "type"))


def _positive_number(v, path, errors):
    if not _is_number(v):
        errors.append((path, "type"))
    elif not v > 0:
        errors.append((path, "range"))


def _features(v, path, errors):
    if not isinstance(v, list):
        errors.append((path, "type"))
        return
    seen = set()
    for i, item in enumerate(v):
        p = f"{path}[{i}]"
        if not isinstance(item, str):
            errors.append((p, "type"))
        elif not FEATURE.fullmatch(item):
            errors.append((p, "pattern"))
        elif item in seen:
            errors.append((p, "duplicate"))
        if isinstance(item, str):
            seen.add(item)


def _limits(v, path, errors):
    if not isinstance(v, dict):
        errors.append((path, "type"))
        return
    for key, value in v.items():
        _int_in(0)(value, f"{path}.{key}", errors)


def _object(fields):
    """fields: name -> (required, check)"""
    def check(v, path, errors):
        if not isinstance(v, dict):
            errors.append((path, "type"))
            return
        prefix = f"{path}." if path else ""
        for name, (required, sub) in fields.items():
            if name in v:
                sub(v[name], prefix + name, errors)
            elif required:
                errors.append((prefix + name, "missing"))
        for name in v:
            if name not in fields:
                errors.append((prefix + str(name), "unknown"))
    return check


SCHEMA = _object({
    "service": (True, _object({
        "name": (True, _string(lambda s: NAME.fullmatch(s) is not None)),
        "port": (True, _int_in(1, 65535)),
        "workers": (False, _int_in(1, 64)),
        "debug": (False, _boolean),
    })),
    "database": (True, _object({
        "url": (True, _string(lambda s: s.startswith(("postgres://", "sqlite:///")))),
        "pool_size": (False, _int_in(1, 100)),
        "timeout_s": (False, _positive_number),
    })),
    "features": (False, _features),
    "limits": (False, _limits),
})


def validate(config):
    errors = []
    SCHEMA(config, "", errors)
    return sorted(errors)


def main(argv):
    if len(argv) != 2:
        print("usage: config_check.py FILE", file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        print(f"config_check: {argv[1]}: {e}", file=sys.stderr)
        return 2
    errors = validate(config)
    for path, code in errors:
        print(f"{path}: {code}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
PY
python3 config_check.py examples/good.json && python3 config_check.py examples/bad.json || true
