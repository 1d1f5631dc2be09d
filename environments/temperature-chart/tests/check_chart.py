"""check_chart.py PATH: a 1000x600 PNG with at least three distinctly coloured series."""

import sys

from PIL import Image

path = sys.argv[1]
img = Image.open(path)
if img.format != "PNG":
    sys.exit(f"{path}: not a PNG ({img.format})")
if img.size != (1000, 600):
    sys.exit(f"{path}: size is {img.size[0]}x{img.size[1]}, expected 1000x600")
hsv = img.convert("RGB").convert("HSV")
buckets = {}
for h, s, v in hsv.getdata():
    if s > 100 and v > 60:
        buckets[h // 16] = buckets.get(h // 16, 0) + 1
strong = sorted(b for b, n in buckets.items() if n >= 50)
print("colour buckets with >= 50 saturated pixels:", strong)
if len(strong) < 3:
    sys.exit("fewer than three distinct line colours")
