"""The HTML report: self-contained (no network), and its charts really render in a headless browser."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from zkconsumer.lab.analysis import AnalysisResult

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="missing tool: chromium (Debian: apt-get install chromium), so the report's "
                             "rendering cannot be checked in a browser")


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    assert CHROMIUM is not None
    # --no-sandbox: the tests run as root, where chromium refuses its sandbox; virtual time lets the page's
    # scripts finish before the DOM is dumped or the picture taken, without a wall-clock wait.
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


def png_pixels(path: Path) -> bytes:
    """The decompressed scanlines of a PNG (filter bytes included): enough to tell a blank picture."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    return zlib.decompress(idat)


def test_the_report_needs_no_network(analysed: AnalysisResult) -> None:
    html = analysed.report.read_text(encoding="utf-8")
    assert re.search(r"<script[^>]*\ssrc=", html) is None  # plotly.js is inline, not fetched
    assert re.search(r"<link[^>]*\shref=", html) is None
    assert "Plotly.newPlot" in html
    assert "Servers: ZooKeeper 3.9.5, Apache Kafka 3.9.2 (as each run recorded them)." in html


@needs_chromium
def test_the_charts_render_in_headless_chromium(analysed: AnalysisResult, tmp_path: Path) -> None:
    html = analysed.report.read_text(encoding="utf-8")
    figures = int(re.search(r"data-figures='(\d+)'", html).group(1))
    assert figures == 6  # two herd curves, the latency boxes, one timeline per design, the predictions
    uri = analysed.report.resolve().as_uri()
    dom = chromium(tmp_path, "--dump-dom", uri)
    assert dom.returncode == 0, dom.stderr[-2000:]
    # plotly draws each figure into <svg class="main-svg"> elements: present only if its script ran
    rendered = len(re.findall(r'<div[^>]*class="[^"]*js-plotly-plot', dom.stdout))
    assert rendered == figures, f"{rendered} of {figures} figures rendered"
    assert dom.stdout.count('class="main-svg"') >= figures
    for title in ("requests per membership change vs N", "latency distributions", "ownership around one change"):
        assert title in dom.stdout
    shot = tmp_path / "report.png"
    taken = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2400", uri)
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    pixels = png_pixels(shot)
    # a blank page is one colour (a handful of distinct bytes with the filter bytes); charts have many
    assert len(set(pixels)) > 50
