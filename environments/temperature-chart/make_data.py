"""Regenerates workspace/temperatures.csv (deterministic). Not part of the workspace."""

import math
import random
from datetime import date, timedelta

rng = random.Random(20240601)
cities = {"Oslo": (6.0, 9.0), "Madrid": (16.0, 8.0), "Cairo": (24.0, 6.0)}
start = date(2023, 1, 1)
rows = ["date,city,temp_c"]
for i in range(0, 365, 2):
    day = start + timedelta(days=i)
    season = -math.cos(2 * math.pi * (i + 10) / 365)
    for city, (mean, amp) in cities.items():
        t = mean + amp * season + rng.gauss(0, 1.8)
        rows.append(f"{day.isoformat()},{city},{t:.1f}")
with open("workspace/temperatures.csv", "w") as f:
    f.write("\n".join(rows) + "\n")
