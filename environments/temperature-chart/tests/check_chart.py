"""check_chart.py CHART CSV: does CHART (a 1000x600 PNG, white background) plot each city of
CSV (``date,city,temp_c``) as a line in that city's colour?

For each city, the pixels of its colour (anti-aliased over white counts too) are found; each
column holding exactly one vertical stroke of that colour gives a height (the stroke's
middle), after horizontal runs of 30+ pixels (legend samples, flat lines) are dropped. The
columns the line spans are mapped linearly onto the city's readings in date order, and the
heights must follow the readings: a Pearson correlation of at least RAW_MIN, and at least
DETAIL_MIN once both curves have had their trend (a moving mean over a few readings) taken
out, which is what tells the real day-to-day readings from a smooth or borrowed curve. The
line must span at least half the image's width, drawn in most of the columns it spans.

Stdlib only (it runs inside the checker sandbox as root): it decodes the PNG itself and
never runs anything the agent wrote. The expected readings come from the hidden copy of
the data (tests/temperatures.csv, the same bytes as workspace/temperatures.csv), not from
the agent's workspace, which the agent may have rewritten to match its chart. Exit 0 on a pass; else a message and exit 1."""

import csv
import math
import os
import stat
import struct
import sys
import zlib

WIDTH, HEIGHT = 1000, 600
COLOURS = {"Oslo": (0, 0, 255), "Madrid": (0, 160, 0), "Cairo": (255, 0, 0)}
WHITE_MIN = 0.5  # at least this share of the pixels is white (the background)
ALPHA_MIN = 0.4  # a pixel is of colour C if it is C blended over white with at least this
RESIDUAL_MAX = 48  # much of C, give or take this much in each channel
FLAT_RUN = 30  # horizontal runs this long are legend samples or flat lines, not data
MERGE_GAP = 4  # strokes of one colour closer than this in a column are one stroke
CLUSTER_GAP = 12  # columns further apart than this start a new cluster
SPAN_MIN = 0.5  # the line spans at least this share of the width...
COVER_MIN = 0.7  # ...and has a height in at least this share of the columns it spans
RAW_MIN = 0.97  # correlation of heights with the readings
DETAIL_MIN = 0.8  # the same once the trend is removed
DETREND_READINGS = 2.5  # the moving mean's half-width, in readings
SLACK = 3  # the line's ends may be this many columns off its first and last readings
MAX_FILE = 20 * 1024 * 1024

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2)]
ADAM7.append((0, 1, 1, 2))


class Bad(Exception):
    pass


# -- PNG decoding ---------------------------------------------------------------------------


def read_file(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise Bad("cannot open %s: %s" % (path, e.strerror)) from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Bad("%s is not a regular file" % path)
        if info.st_size > MAX_FILE:
            raise Bad("%s is larger than %d bytes" % (path, MAX_FILE))
        return f.read(MAX_FILE + 1)


def chunks(data):
    pos = len(SIGNATURE)
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        crc = data[pos + 8 + length : pos + 12 + length]
        if len(body) != length or len(crc) != 4:
            raise Bad("invalid PNG: truncated %r chunk" % kind)
        if zlib.crc32(kind + body) & 0xFFFFFFFF != struct.unpack(">I", crc)[0]:
            raise Bad("invalid PNG: bad CRC in %r chunk" % kind)
        yield kind, body
        if kind == b"IEND":
            return
        pos += 12 + length
    raise Bad("invalid PNG: no IEND chunk")


def unfilter(raw, pos, width, height, bits, channels):
    """The unfiltered scanlines of one (sub)image starting at raw[pos]; and the end pos."""
    bpp = max(1, bits * channels // 8)
    stride = (width * bits * channels + 7) // 8
    prev = bytearray(stride)
    out = []
    for _ in range(height):
        if pos + 1 + stride > len(raw):
            raise Bad("invalid PNG: image data too short")
        kind, line = raw[pos], bytearray(raw[pos + 1 : pos + 1 + stride])
        pos += 1 + stride
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                if pa <= pb and pa <= pc:
                    pred = a
                elif pb <= pc:
                    pred = b
                else:
                    pred = c
                line[i] = (line[i] + pred) & 0xFF
        elif kind != 0:
            raise Bad("invalid PNG: unknown filter type %d" % kind)
        out.append(line)
        prev = line
    return out, pos


def samples(line, width, bits, channels):
    """One scanline's samples, scaled to 0..255 (palette indices kept as they are)."""
    if bits == 8:
        return line
    if bits == 16:
        return line[0::2]
    per_byte, mask = 8 // bits, (1 << bits) - 1
    out = bytearray()
    for byte in line:
        for k in range(per_byte):
            out.append((byte >> (8 - bits * (k + 1))) & mask)
    return out[: width * channels]


def decode(path):
    """The image at ``path`` as rows of (r, g, b) tuples, composited over white."""
    data = read_file(path)
    if not data.startswith(SIGNATURE):
        raise Bad("%s is not a PNG file" % path)
    try:
        parts = list(chunks(data))
        if not parts or parts[0][0] != b"IHDR":
            raise Bad("invalid PNG: IHDR must come first")
        width, height, bits, colour, _, _, interlace = struct.unpack(">IIBBBBB", parts[0][1])
    except struct.error:
        raise Bad("invalid PNG: bad IHDR") from None
    if (width, height) != (WIDTH, HEIGHT):
        raise Bad("the chart is %dx%d, expected %dx%d" % (width, height, WIDTH, HEIGHT))
    if colour not in CHANNELS or bits not in (1, 2, 4, 8, 16):
        raise Bad("invalid PNG: colour type %d, bit depth %d" % (colour, bits))
    channels = CHANNELS[colour]
    palette, trns = None, b""
    for kind, body in parts:
        if kind == b"PLTE":
            palette = [tuple(body[i : i + 3]) for i in range(0, len(body) - 2, 3)]
        elif kind == b"tRNS":
            trns = body
    if colour == 3 and not palette:
        raise Bad("invalid PNG: palette image without a palette")
    stride = (width * bits * channels + 7) // 8
    try:
        z = zlib.decompressobj()
        raw = z.decompress(b"".join(b for k, b in parts if k == b"IDAT"), 2 * (stride + 1) * height)
    except zlib.error as e:
        raise Bad("invalid PNG: %s" % e) from None

    if interlace:
        grid = [[None] * width for _ in range(height)]
        pos = 0
        for x0, y0, dx, dy in ADAM7:
            w, h = (width - x0 + dx - 1) // dx, (height - y0 + dy - 1) // dy
            if w <= 0 or h <= 0:
                continue
            lines, pos = unfilter(raw, pos, w, h, bits, channels)
            for j, line in enumerate(lines):
                row = pixels(samples(line, w, bits, channels), w, colour, bits, palette, trns)
                grid[y0 + j * dy][x0::dx] = row
        return grid
    lines, _ = unfilter(raw, 0, width, height, bits, channels)
    return [
        pixels(samples(ln, width, bits, channels), width, colour, bits, palette, trns)
        for ln in lines
    ]


def pixels(s, width, colour, bits, palette, trns):
    """(r, g, b) per pixel of one row of samples, any transparency composited over white."""
    if colour == 3:
        alphas = list(trns) + [255] * (256 - len(trns))
        out = []
        for i in s[:width]:
            if i >= len(palette):
                raise Bad("invalid PNG: palette index out of range")
            out.append(over_white(palette[i], alphas[i]))
        return out
    if colour in (0, 4):
        scale = 255 // ((1 << bits) - 1) if bits < 8 else 1
        key = struct.unpack(">H", trns[:2])[0] if colour == 0 and len(trns) >= 2 else None
        out = []
        step = 1 if colour == 0 else 2
        for i in range(width):
            v = s[i * step]
            a = s[i * step + 1] if colour == 4 else 255
            if key is not None and bits <= 8 and v == key:
                a = 0
            v = v * scale
            out.append(over_white((v, v, v), a))
        return out
    step = 3 if colour == 2 else 4
    key = struct.unpack(">HHH", trns[:6]) if colour == 2 and len(trns) >= 6 and bits == 8 else None
    out = []
    for i in range(0, width * step, step):
        rgb = (s[i], s[i + 1], s[i + 2])
        a = s[i + 3] if colour == 6 else (0 if rgb == key else 255)
        out.append(rgb if a == 255 else over_white(rgb, a))
    return out


def over_white(rgb, a):
    if a == 255:
        return rgb
    return tuple((c * a + 255 * (255 - a)) // 255 for c in rgb)


# -- the data -------------------------------------------------------------------------------


def load_series(path):
    series = {city: [] for city in COLOURS}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["city"] in series:
                series[row["city"]].append((row["date"], float(row["temp_c"])))
    out = {}
    for city, points in series.items():
        points.sort()
        out[city] = [t for _, t in points]
        if len(out[city]) < 10:
            raise SystemExit("internal: too few readings for %s in %s" % (city, path))
    return out


# -- the check ------------------------------------------------------------------------------


def matches(rgb, colour):
    """Is ``rgb`` ``colour`` blended over white, with at least ALPHA_MIN of the colour?"""
    d = [255 - c for c in colour]
    q = [255 - c for c in rgb]
    alpha = sum(a * b for a, b in zip(q, d)) / float(sum(a * a for a in d))
    if alpha < ALPHA_MIN:
        return False
    alpha = min(alpha, 1.0)
    return all(abs(a - alpha * b) <= RESIDUAL_MAX for a, b in zip(q, d))


def heights(grid, colour):
    """{column: height of the one stroke of ``colour`` in it (0 = bottom)}."""
    cache = {}
    mask = []
    for row in grid:
        line = []
        for p in row:
            hit = cache.get(p)
            if hit is None:
                hit = cache[p] = matches(p, colour)
            line.append(hit)
        x = 0  # drop horizontal runs of FLAT_RUN or more
        while x < WIDTH:
            if line[x]:
                end = x
                while end < WIDTH and line[end]:
                    end += 1
                if end - x >= FLAT_RUN:
                    line[x:end] = [False] * (end - x)
                x = end
            else:
                x += 1
        mask.append(line)
    out = {}
    for x in range(WIDTH):
        strokes = []
        for y in range(HEIGHT):
            if mask[y][x]:
                if strokes and y - strokes[-1][1] <= MERGE_GAP:
                    strokes[-1][1] = y
                else:
                    strokes.append([y, y])
        if len(strokes) == 1:
            out[x] = HEIGHT - 1 - (strokes[0][0] + strokes[0][1]) / 2.0
    return out


def pearson(xs, ys):
    n = len(xs)
    if n < 3:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 1e-9 or syy <= 1e-9:
        return 0.0
    return sxy / math.sqrt(sxx * syy)


def detrend(cols, vals, half):
    """Each value minus the mean of the values within ``half`` columns of it."""
    out = []
    lo = hi = 0
    total = 0.0
    n = len(cols)
    for i, c in enumerate(cols):
        while hi < n and cols[hi] <= c + half:
            total += vals[hi]
            hi += 1
        while cols[lo] < c - half:
            total -= vals[lo]
            lo += 1
        out.append(vals[i] - total / (hi - lo))
    return out


def interp(values, t):
    t = min(max(t, 0.0), len(values) - 1.0)
    i = min(int(t), len(values) - 2)
    f = t - i
    return values[i] * (1 - f) + values[i + 1] * f


def score(hs, values, c0, c1):
    """(raw, detail) correlations of the heights in columns c0..c1 with ``values`` laid
    over those columns."""
    cols = [c for c in sorted(hs) if c0 <= c <= c1]
    if len(cols) < 10 or c1 <= c0:
        return 0.0, 0.0
    per = (c1 - c0) / float(len(values) - 1)
    want = [interp(values, (c - c0) / per) for c in cols]
    got = [hs[c] for c in cols]
    raw = pearson(got, want)
    half = max(2.0, DETREND_READINGS * per)
    detail = pearson(detrend(cols, got, half), detrend(cols, want, half))
    return raw, detail


def clusters(columns):
    out = []
    for c in columns:
        if out and c - out[-1][-1] <= CLUSTER_GAP:
            out[-1].append(c)
        else:
            out.append([c])
    return out


SHIFTS = [(d0, d1) for d0 in range(-SLACK, SLACK + 1) for d1 in range(-SLACK, SLACK + 1)]


def evaluate(hs, values, c0, c1, cover):
    raw, detail = score(hs, values, c0, c1)
    return (min(raw / RAW_MIN, detail / DETAIL_MIN), raw, detail), raw, detail, c0, c1, cover


def check_series(grid, city, values):
    """(ok, message) for one city."""
    hs = heights(grid, COLOURS[city])
    colour = "#%02x%02x%02x" % COLOURS[city]
    if not hs:
        return False, "%s: no line in %s (no column holds one stroke of it)" % (city, colour)
    groups = clusters(sorted(hs))
    best = None  # (key, raw, detail, first, last, cover)
    widest = 0
    for i in range(len(groups)):  # every run of neighbouring clusters may be the line
        for j in range(i, len(groups)):
            first, last = groups[i][0], groups[j][-1]
            span = last - first + 1
            widest = max(widest, span)
            cover = sum(len(g) for g in groups[i : j + 1]) / float(span)
            if span < SPAN_MIN * WIDTH or cover < COVER_MIN:
                continue
            shifts = [(0, 0)] if len(groups) > 1 else SHIFTS
            for d0, d1 in shifts:
                candidate = evaluate(hs, values, first + d0, last + d1, cover)
                if best is None or candidate[0] > best[0]:
                    best = candidate
    if best is not None and len(groups) > 1:  # then the ends of the best one, finely
        _, _, _, first, last, cover = best
        for d0, d1 in SHIFTS:
            candidate = evaluate(hs, values, first + d0, last + d1, cover)
            if candidate[0] > best[0]:
                best = candidate
    if best is None:
        return False, (
            "%s: the %s line spans at most %d columns with a height in %d of them "
            "(needs %d, mostly drawn)" % (city, colour, widest, len(hs), SPAN_MIN * WIDTH)
        )
    _, raw, detail, first, last, cover = best
    message = "%s (%s): columns %d-%d, %.0f%% drawn, correlation %.3f, day to day %.3f" % (
        city,
        colour,
        first,
        last,
        100 * cover,
        raw,
        detail,
    )
    return raw >= RAW_MIN and detail >= DETAIL_MIN, message


def main(chart, data):
    series = load_series(data)
    try:
        grid = decode(chart)
    except Bad as e:
        return "FAIL: %s" % e
    white = sum(1 for row in grid for p in row if min(p) >= 235)
    if white < WHITE_MIN * WIDTH * HEIGHT:
        return "FAIL: the background is not white (%.0f%% white pixels)" % (
            100.0 * white / (WIDTH * HEIGHT)
        )
    failed = False
    for city, values in series.items():
        ok, message = check_series(grid, city, values)
        print(("ok   " if ok else "FAIL ") + message)
        failed = failed or not ok
    if failed:
        return (
            "FAIL: the chart does not plot the readings (needs correlation >= %.2f and day to day >= %.2f)"
            % (
                RAW_MIN,
                DETAIL_MIN,
            )
        )
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
