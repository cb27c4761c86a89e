#!/usr/bin/env python3
"""
Draws the social icons the builder's social block shows (mailsvc/web/social/<network>.png):
a white glyph made of simple shapes on a disc of the network's colour, 56x56 px (shown at 28
px, sharp on 2x screens), supersampled 4x4 for smooth edges. Standard library only; run it to
re-make the committed files: python3 scripts/social_icons.py
"""

import math
import struct
import zlib
from pathlib import Path

SIZE = 56
SAMPLES = 4
OUT = Path(__file__).resolve().parent.parent / "mailsvc" / "web" / "social"
COLOURS = {"x": "#000000", "linkedin": "#0a66c2", "instagram": "#d62976", "facebook": "#1877f2",
           "youtube": "#ff0000", "github": "#24292f", "tiktok": "#010101", "discord": "#5865f2",
           "website": "#4b5563"}


def seg(ax, ay, bx, by, w):
    def inside(x, y):
        dx, dy = bx - ax, by - ay
        t = max(0.0, min(1.0, ((x - ax) * dx + (y - ay) * dy) / (dx * dx + dy * dy)))
        return math.hypot(x - ax - t * dx, y - ay - t * dy) <= w / 2
    return inside


def disc(cx, cy, r):
    return lambda x, y: math.hypot(x - cx, y - cy) <= r


def ring(cx, cy, r, w, arc=None):
    def inside(x, y):
        d = math.hypot(x - cx, y - cy)
        if abs(d - r) > w / 2:
            return False
        if arc is None:
            return True
        a = math.degrees(math.atan2(y - cy, x - cx)) % 360
        lo, hi = arc
        return lo <= a <= hi if lo <= hi else (a >= lo or a <= hi)
    return inside


def ellipse_ring(cx, cy, rx, ry, w):
    def inside(x, y):
        d = math.hypot((x - cx) / rx, (y - cy) / ry)
        return abs(d - 1) * min(rx, ry) <= w / 2
    return inside


def box(x0, y0, x1, y1, r=0.0):
    def inside(x, y):
        qx = max(x0 + r - x, 0, x - (x1 - r))
        qy = max(y0 + r - y, 0, y - (y1 - r))
        return math.hypot(qx, qy) <= r if r else (x0 <= x <= x1 and y0 <= y <= y1)
    return inside


def box_ring(x0, y0, x1, y1, r, w):
    outer, inner = box(x0, y0, x1, y1, r), box(x0 + w, y0 + w, x1 - w, y1 - w, max(r - w, 0))
    return lambda x, y: outer(x, y) and not inner(x, y)


def triangle(a, b, c):
    def inside(x, y):
        def side(p, q):
            return (q[0] - p[0]) * (y - p[1]) - (q[1] - p[1]) * (x - p[0])
        s1, s2, s3 = side(a, b), side(b, c), side(c, a)
        return (s1 >= 0 and s2 >= 0 and s3 >= 0) or (s1 <= 0 and s2 <= 0 and s3 <= 0)
    return inside


# Glyphs on a 0..1 square (the disc has radius 0.5 around 0.5, 0.5).
GLYPHS = {
    "x": [seg(0.33, 0.30, 0.67, 0.70, 0.07), seg(0.67, 0.30, 0.33, 0.70, 0.07)],
    "linkedin": [disc(0.35, 0.31, 0.05), box(0.305, 0.40, 0.395, 0.70), box(0.455, 0.40, 0.54, 0.70),
                 ring(0.585, 0.52, 0.09, 0.085, (180, 360)), box(0.63, 0.52, 0.715, 0.70)],
    "instagram": [box_ring(0.29, 0.29, 0.71, 0.71, 0.12, 0.06), ring(0.5, 0.5, 0.1, 0.06), disc(0.62, 0.38, 0.03)],
    "facebook": [box(0.47, 0.40, 0.56, 0.78), ring(0.62, 0.40, 0.105, 0.09, (180, 285)),
                 box(0.40, 0.44, 0.64, 0.52)],
    "youtube": [box(0.26, 0.32, 0.74, 0.68, 0.09)],
    "github": [seg(0.40, 0.36, 0.28, 0.50, 0.07), seg(0.28, 0.50, 0.40, 0.64, 0.07),
               seg(0.60, 0.36, 0.72, 0.50, 0.07), seg(0.72, 0.50, 0.60, 0.64, 0.07), seg(0.54, 0.32, 0.46, 0.68, 0.06)],
    "tiktok": [box(0.50, 0.27, 0.58, 0.62), ring(0.44, 0.62, 0.10, 0.08), ring(0.68, 0.27, 0.12, 0.08, (90, 180))],
    "discord": [box(0.27, 0.33, 0.73, 0.67, 0.14)],
    "website": [ring(0.5, 0.5, 0.22, 0.05), ellipse_ring(0.5, 0.5, 0.10, 0.22, 0.05), box(0.29, 0.475, 0.71, 0.525),
                box(0.33, 0.37, 0.67, 0.40), box(0.33, 0.60, 0.67, 0.63)],
}
#: Shapes drawn in the disc's colour on top of the glyph (holes).
HOLES = {
    "youtube": [triangle((0.45, 0.40), (0.45, 0.60), (0.60, 0.50))],
    "discord": [disc(0.41, 0.50, 0.045), disc(0.59, 0.50, 0.045)],
}


def png(name: str) -> bytes:
    colour = tuple(int(COLOURS[name][i:i + 2], 16) for i in (1, 3, 5))
    rows = []
    for py in range(SIZE):
        row = bytearray([0])
        for px in range(SIZE):
            cover = white = 0
            for sy in range(SAMPLES):
                for sx in range(SAMPLES):
                    x = (px + (sx + 0.5) / SAMPLES) / SIZE
                    y = (py + (sy + 0.5) / SAMPLES) / SIZE
                    if math.hypot(x - 0.5, y - 0.5) > 0.5:
                        continue
                    cover += 1
                    if any(s(x, y) for s in GLYPHS[name]) and not any(s(x, y) for s in HOLES.get(name, ())):
                        white += 1
            n = SAMPLES * SAMPLES
            if cover == 0:
                row += bytes(4)
                continue
            mix = white / cover
            rgb = [round(c + (255 - c) * mix) for c in colour]
            row += bytes([*rgb, round(255 * cover / n)])
        rows.append(bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", SIZE, SIZE, 8, 6, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"".join(rows), 9))
            + chunk(b"IEND", b""))


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for network in COLOURS:
        (OUT / f"{network}.png").write_bytes(png(network))
        print(OUT / f"{network}.png")
