"""compare --html in a real browser: headless Chromium (Debian's `chromium`, installed by
scripts/install-deps.sh) loads the page, the DOM it ends with is checked (every plot present,
one series per mode, the page's own check script ran and passed, no script error), and a
screenshot must not be blank.

Skips, saying so, when chromium is absent -- unless CI=true, where a missing browser fails.
"""
import json
import os
import pathlib
import re
import shutil
import struct
import subprocess
import zlib

import pytest

GEARS = '{"x": {"0": [1, 2, 4, 8]}, "y": {"0": [1, 2, 4, 8]}}'


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true but no chromium on PATH: scripts/install-deps.sh installs it")
    pytest.skip("SKIPPED: chromium is not installed (apt-get install chromium); the HTML "
                "report's browser test runs in CI")


def chromium_args(browser, profile):
    # A throwaway profile directory so runs never share state; no sandbox (containers, root).
    return [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", "--user-data-dir=" + str(profile)]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    repo = pathlib.Path(__file__).resolve().parents[2]
    build = pathlib.Path(os.environ.get("GEARBOX_BUILD_DIR", repo / "build"))
    out = tmp_path_factory.mktemp("html") / "report.html"
    report_json = out.with_suffix(".json")
    r = subprocess.run(
        [str(build / "bin" / "gearbox"), "compare", "examples/four_ops.gbx",
         "--trace", "examples/four_ops.trace.jsonl", "--gears", GEARS,
         "--gear-fallback", "pad", "--repeat", "3", "--html", str(out), "--json", str(report_json)],
        capture_output=True, text=True, timeout=120, cwd=repo)
    assert r.returncode == 0, r.stdout + r.stderr
    # The modes compare ran (every mode, since gears are given), from its own JSON report.
    return out, sorted(json.loads(report_json.read_text())["modes"])


def png_pixels(data):
    """Decodes an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes) into rows of
    pixel tuples, with zlib only."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def test_report_dom_in_headless_chromium(report, tmp_path):
    browser = find_chromium()
    report, modes_run = report
    r = subprocess.run(
        chromium_args(browser, tmp_path / "profile") +
        ["--enable-logging=stderr", "--v=0", "--dump-dom", report.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    body = re.search(r"<body[^>]*>", dom)
    assert body, dom[:2000]
    # The page's inline check ran in the browser and found every plot with its series.
    assert 'data-check="ok"' in body.group(0), body.group(0)
    assert "data-script-error" not in body.group(0), body.group(0)
    plots = re.findall(r'<svg class="plot" data-plot="([a-z-]+)" data-expected-series="(\d+)"',
                       dom)
    names = [p[0] for p in plots]
    assert names == ["graph-compiles", "kernel-compiles", "measured-per-call",
                     "modeled-per-call", "padding-waste", "modeled-breakdown"], names
    for svg in re.findall(r'<svg class="plot".*?</svg>', dom, re.S):
        modes = re.findall(r'<g class="series" data-mode="([a-z-]+)"', svg)
        want = int(re.search(r'data-expected-series="(\d+)"', svg).group(1))
        assert len(modes) == want
        if want > 1:
            assert sorted(modes) == modes_run, modes
    # No console error or uncaught exception from the page (Chromium logs them as CONSOLE).
    console = [l for l in r.stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l]
    assert not console, console


def test_report_screenshot_is_not_blank(report, tmp_path):
    browser = find_chromium()
    report = report[0]
    shot = tmp_path / "report.png"
    r = subprocess.run(
        chromium_args(browser, tmp_path / "profile") +
        ["--screenshot=" + str(shot), "--window-size=1280,2000", report.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    width, height, bpp, rows = png_pixels(shot.read_bytes())
    assert (width, height) == (1280, 2000)
    colours = set()
    for row in rows[::8]:
        for x in range(0, len(row), bpp * 4):
            colours.add(row[x:x + 3])
    # A blank or failed page is one or two colours; the report has text, tables and plots in
    # every mode's colour.
    assert len(colours) > 20, len(colours)
    out = os.environ.get("GEARBOX_REPORT_SCREENSHOT")
    if out:  # how docs/img/report.png is made
        shutil.copyfile(shot, out)


def test_sweep_dim_page_in_headless_chromium(tmp_path):
    """compare --sweep-dim --html: the latency-vs-size plots come first after the table, one
    series per mode (with the measured band: two repeats), and the page's check passes. Small
    sizes, so the measured run stays short."""
    browser = find_chromium()
    repo = pathlib.Path(__file__).resolve().parents[2]
    build = pathlib.Path(os.environ.get("GEARBOX_BUILD_DIR", repo / "build"))
    page = tmp_path / "sweep.html"
    r = subprocess.run(
        [str(build / "bin" / "gearbox"), "compare", "examples/mlp.gbx", "--sweep-dim",
         "x:4:4:32", "--gears", '{"x": {"0": [8, 16, 32]}}', "--gear-fallback", "pad",
         "--repeat", "2", "-q", "--html", str(page)],
        capture_output=True, text=True, timeout=300, cwd=repo)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(
        chromium_args(browser, tmp_path / "profile") + ["--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    body = re.search(r"<body[^>]*>", r.stdout).group(0)
    assert 'data-check="ok"' in body and "data-script-error" not in body, body
    names = re.findall(r'<svg class="plot" data-plot="([a-z-]+)" data-expected-series="6"',
                       r.stdout)
    assert names[:2] == ["sweep-measured", "sweep-modeled"], names
    measured = r.stdout[r.stdout.index('data-plot="sweep-measured"'):]
    measured = measured[:measured.index("</svg>")]
    assert measured.count('<polygon class="band"') == 6  # every mode's min-max band
    assert '<circle class="mark"' in measured  # the calls that compiled
