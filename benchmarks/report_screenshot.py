"""Screenshots of report.html pages in a real browser (headless Chromium), to look at them as a reader does.

    python benchmarks/report_screenshot.py outputs/smoke outputs/cpu --out shots/
    python benchmarks/report_screenshot.py outputs/cpu/report.html --out shots/ --expand

Each argument is a run folder (its report.html is taken) or an HTML file; each page becomes
`<out>/<run>.png`, the full page at 1280 px wide (taken in a tall window, then cut below the
page's last non-white row). `--expand` opens every collapsed section (the models' replies) first,
in a copy of the page. Chromium: Debian's `chromium` package (`apt-get install -y chromium`), or
$CHROMIUM. It starts with a fresh profile and no network features, and is stopped after each page.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars", "--force-device-scale-factor=1"]


def chromium() -> str:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    sys.exit("no Chromium found: `apt-get install -y chromium` (Debian), or set $CHROMIUM to its binary")


def page_of(arg: str) -> tuple[str, Path]:
    p = Path(arg)
    page = p / "report.html" if p.is_dir() else p
    if not page.is_file():
        sys.exit(f"{arg}: no report.html there (run the pipeline's 05_report first)")
    name = p.name if p.is_dir() else p.parent.name
    return name, page.resolve()


def trim(png: Path, margin: int = 24) -> tuple[int, int]:
    """Cut the white space below the page's content; returns the final (width, height)."""
    from PIL import Image, ImageChops

    img = Image.open(png).convert("RGB")
    bg = Image.new("RGB", img.size, (255, 255, 255))
    box = ImageChops.difference(img, bg).getbbox()
    if box is not None:
        img = img.crop((0, 0, img.width, min(img.height, box[3] + margin)))
    img.save(png)
    return img.size


def shoot(browser: str, page: Path, out: Path, width: int, height: int, expand: bool) -> tuple[int, int, float]:
    with tempfile.TemporaryDirectory(prefix="report-shot-") as tmp:
        if expand:
            copy = Path(tmp) / page.name
            copy.write_text(page.read_text(encoding="utf-8").replace("<details>", "<details open>"), encoding="utf-8")
            page = copy
        profile = Path(tmp) / "profile"
        cmd = [browser, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
               f"--screenshot={out}", page.as_uri()]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        wall = time.perf_counter() - t0
    if done.returncode != 0 or not out.is_file():
        sys.exit(f"chromium failed on {page} (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return (*trim(out), wall)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pages", nargs="+", help="run folders (outputs/<run>) or report.html files")
    ap.add_argument("--out", default="report_screenshots", help="folder for the PNGs")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=16000, help="the window's height: taller than any page")
    ap.add_argument("--expand", action="store_true", help="open the collapsed replies before the screenshot")
    args = ap.parse_args(argv)
    browser = chromium()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for arg in args.pages:
        name, page = page_of(arg)
        out = out_dir / f"{name}{'_expanded' if args.expand else ''}.png"
        w, h, wall = shoot(browser, page, out, args.width, args.height, args.expand)
        print(f"{page} -> {out} ({w}x{h} px, {wall:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
