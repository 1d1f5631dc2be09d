"""Regenerates workspace/shop.db (deterministic). Not part of the workspace."""

import os
import sys

sys.path.insert(0, "tests")
from shopdb import build

if os.path.exists("workspace/shop.db"):
    os.remove("workspace/shop.db")
build("workspace/shop.db", seed=2024)
