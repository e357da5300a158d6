"""Headless Chromium for tests that must see a page rendered (Debian's `chromium`; `make test` installs it).

Every call gets a fresh profile directory and a hard timeout; no network features are on, so a page
that tried to load anything external would simply show without it.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
TIMEOUT_S = 90
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--force-device-scale-factor=1")


def chromium() -> str:
    """The browser's path; skip (with the fix) only where `make test` couldn't have installed it."""
    path = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if path:
        return path
    if os.geteuid() == 0:
        pytest.fail("chromium is missing: run `make system-deps` (apt-get install -y chromium); `make test` "
                    "does this itself")
    pytest.skip("chromium is not installed and we are not root to install it: "
                "`sudo apt-get install -y chromium` (or `sudo make chromium`)")


def _run(args: list[str]) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="eosctl-chromium-") as profile:
        return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, timeout=TIMEOUT_S, check=False)


def screenshot(html: Path, png: Path, width: int = 1280, height: int = 1600) -> None:
    done = _run([f"--window-size={width},{height}", f"--screenshot={png}", html.resolve().as_uri()])
    assert png.is_file(), f"chromium wrote no screenshot (exit {done.returncode}): {done.stderr[-2000:]!r}"


def dump_dom(html: Path) -> str:
    """The DOM after rendering, serialized by the browser."""
    done = _run(["--dump-dom", html.resolve().as_uri()])
    assert done.returncode == 0, f"chromium --dump-dom failed: {done.stderr[-2000:]!r}"
    return done.stdout.decode("utf-8")


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB/RGBA, non-interlaced PNG (what Chromium
    writes), decoded with zlib: no imaging library needed."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, head = 8, b"", None
    while pos < len(data):
        length, ctype = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if ctype == b"IHDR":
            head = struct.unpack(">IIBBBBB", chunk)
        elif ctype == b"IDAT":
            idat += chunk
    assert head is not None, "PNG without IHDR"
    width, height, depth, colour, _, _, interlace = head
    assert depth == 8 and colour in (2, 6) and interlace == 0, f"unsupported PNG {head}"
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    low, high = int.from_bytes(b"\x7f" * stride, "big"), int.from_bytes(b"\x80" * stride, "big")
    rows: list[bytes] = []
    prev = bytes(stride)
    for y in range(height):
        ftype, line = raw[y * (stride + 1)], raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)]
        if ftype == 2:  # "up", most of Chromium's rows: bytewise add without carries, on one big int
            a, b = int.from_bytes(line, "big"), int.from_bytes(prev, "big")
            line = (((a & low) + (b & low)) ^ ((a ^ b) & high)).to_bytes(stride, "big")
        elif ftype in (1, 3, 4):
            line = _unfilter(ftype, bytearray(line), prev, bpp)
        rows.append(bytes(line))
        prev = rows[-1]
    return width, height, rows


def _unfilter(ftype: int, line: bytearray, prev: bytes, bpp: int) -> bytes:
    for i in range(len(line)):
        a = line[i - bpp] if i >= bpp else 0
        if ftype == 1:
            line[i] = (line[i] + a) & 255
        elif ftype == 3:
            line[i] = (line[i] + (a + prev[i]) // 2) & 255
        else:
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    return bytes(line)


def colours(data: bytes, step: int = 3) -> dict[tuple[int, int, int], int]:
    """How many (sampled) pixels have each RGB colour."""
    width, height, rows = png_pixels(data)
    bpp = len(rows[0]) // width
    out: dict[tuple[int, int, int], int] = {}
    for y in range(0, height, step):
        row = rows[y]
        for x in range(0, width, step):
            rgb = (row[x * bpp], row[x * bpp + 1], row[x * bpp + 2])
            out[rgb] = out.get(rgb, 0) + 1
    return out
