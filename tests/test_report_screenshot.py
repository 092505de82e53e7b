"""The report page as a reader's browser lays it out: headless Chromium at 1280 px wide, for a cpu run
and a gpu-like run (tests/report_fixtures.py), measured by benchmarks/report_screenshot.py (the
layout's width and what reaches past the window's edge, read back from the page) and photographed.

Chromium comes from Debian (`apt-get install -y chromium`); .ci/run installs it, and sets
TRITONRL_REQUIRE_CHROMIUM=1 so that there a missing browser fails instead of skipping. Elsewhere the
test skips, saying so. TRITONRL_REPORT_SHOTS=DIR keeps the PNGs there (to look at them).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from PIL import Image, ImageChops

from report_fixtures import cpu_run, gpu_run
from tritonrl_lib.report.build import build_report

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import report_screenshot as shots  # noqa: E402  (benchmarks/ is a folder of scripts, not a package)

WIDTH = 1280
BROWSER = shots.find_chromium()


@pytest.fixture
def browser() -> str:
    if BROWSER is None:
        why = ("no Chromium on this machine (`apt-get install -y chromium` on Debian, or set $CHROMIUM); "
               ".ci/run installs it before `make test`")
        if os.environ.get("TRITONRL_REQUIRE_CHROMIUM") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return BROWSER


def _plain(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("`", "")).strip()


@pytest.mark.parametrize("make", [cpu_run, gpu_run], ids=["cpu-run", "gpu-like-run"])
def test_the_report_page_fits_1280_px_and_reads_as_written(make, browser, run_dir, tmp_path):
    cfg, paths = make(run_dir)
    report = build_report(cfg, paths)
    for expand in (False, True):  # and with every model's reply opened (their long lines scroll inside their box)
        m = shots.measure(browser, report.html_path, WIDTH, expand=expand)
        assert m["inner_width"] == WIDTH
        assert m["scroll_width"] <= WIDTH and not m["past_edge"], \
            f"laid out {m['scroll_width']} px wide (expand={expand}); past the right edge: {m['past_edge']}"
        assert m["images"] and all(m["images"]), f"charts not drawn: {m['images']}"
        text = _plain(m["text"])
        assert "NoChart(" not in text and not re.search(r"\bNone\b", text), re.findall(r".{60}\bNone\b.{20}", text)
    # the headline, as the report wrote it, is on the page a reader sees
    assert "Headline" in m["headings"] and report.headline
    for line in report.headline:
        assert _plain(line) in text, line
    on_gpu = make is gpu_run
    assert any("published setup at 7B" in h and "measured elsewhere" in h for h in m["headings"]) == on_gpu
    assert ("Held-out KernelBench problems" in m["headings"]) == on_gpu
    # the picture: 1280 px wide, and nothing drawn up to the right edge (the page keeps its margin)
    png = tmp_path / f"{paths.root.name}.png"
    width, height, _ = shots.shoot(browser, report.html_path, png, WIDTH)
    assert width == WIDTH and height > 3000
    img = Image.open(png).convert("RGB")
    ink = ImageChops.difference(img, Image.new("RGB", img.size, (255, 255, 255))).getbbox()
    assert ink is not None and ink[2] <= WIDTH - 40, f"content reaches x={ink and ink[2]} of {WIDTH}"
    keep = os.environ.get("TRITONRL_REPORT_SHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / f"{'gpu' if on_gpu else 'cpu'}_run.png")
