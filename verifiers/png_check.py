"""png_check.py PATH MIN_WIDTH MIN_HEIGHT: is PATH a valid PNG, at least that big, and not
blank (more than one colour)? Prints one JSON object: {"ok": ..., "detail": ..., ...}."""

import json
import struct
import sys
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def chunks(data):
    pos = len(SIGNATURE)
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        crc = data[pos + 8 + length : pos + 12 + length]
        if len(body) != length or len(crc) != 4:
            raise ValueError("truncated %r chunk" % kind)
        if zlib.crc32(kind + body) & 0xFFFFFFFF != struct.unpack(">I", crc)[0]:
            raise ValueError("bad CRC in %r chunk" % kind)
        yield kind, body
        pos += 12 + length


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def rows(raw, width, height, bits, channels):
    """Unfiltered scanlines (non-interlaced images)."""
    bpp = max(1, bits * channels // 8)
    stride = (width * bits * channels + 7) // 8
    prev = bytearray(stride)
    pos = 0
    for _ in range(height):
        kind, line = raw[pos], bytearray(raw[pos + 1 : pos + 1 + stride])
        if len(line) != stride:
            raise ValueError("image data too short")
        pos += 1 + stride
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                line[i] = (line[i] + paeth(a, b, c)) & 0xFF
            elif kind != 0:
                raise ValueError("unknown filter type %d" % kind)
        yield bytes(line)
        prev = line


def check(path, min_width, min_height):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return {"ok": False, "detail": "cannot read %s: %s" % (path, e.strerror)}
    if not data.startswith(SIGNATURE):
        return {"ok": False, "detail": "not a PNG file (bad signature)"}
    try:
        parts = list(chunks(data))
        if not parts or parts[0][0] != b"IHDR" or parts[-1][0] != b"IEND":
            raise ValueError("IHDR must come first and IEND last")
        width, height, bits, colour, _, _, interlace = struct.unpack(">IIBBBBB", parts[0][1])
        if colour not in CHANNELS:
            raise ValueError("unknown colour type %d" % colour)
        raw = zlib.decompress(b"".join(body for kind, body in parts if kind == b"IDAT"))
    except (ValueError, struct.error, zlib.error) as e:
        return {"ok": False, "detail": "invalid PNG: %s" % e}
    info = {"width": width, "height": height}
    if width < min_width or height < min_height:
        info.update(
            ok=False, detail="%dx%d is smaller than %dx%d" % (width, height, min_width, min_height)
        )
        return info
    if interlace:
        colours = len(set(raw[1:])) if raw else 0  # rough, but blank stays blank
    else:
        try:
            pixel = max(1, bits * CHANNELS[colour] // 8)
            seen = set()
            for line in rows(raw, width, height, bits, CHANNELS[colour]):
                for i in range(0, len(line), pixel):
                    seen.add(line[i : i + pixel])
                    if len(seen) > 1:
                        break
                if len(seen) > 1:
                    break
            colours = len(seen)
        except ValueError as e:
            return {"ok": False, "detail": "invalid PNG: %s" % e}
    if colours <= 1:
        info.update(ok=False, detail="blank: every pixel is the same colour")
        return info
    info.update(ok=True, detail="valid %dx%d PNG, not blank" % (width, height))
    return info


if __name__ == "__main__":
    print(json.dumps(check(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))
