"""Screenshots of report.html pages in a real browser (headless Chromium), to look at them as a reader does,
and a check of what the browser laid out: does the page fit the window's width?

    python benchmarks/report_screenshot.py outputs/smoke outputs/cpu --out shots/
    python benchmarks/report_screenshot.py outputs/cpu/report.html --out shots/ --expand
    python benchmarks/report_screenshot.py outputs/cpu --check      # exit 1 when a page is wider than 1280 px

Each argument is a run folder (its report.html is taken) or an HTML file; each page becomes
`<out>/<run>.png`, the full page at 1280 px wide (taken in a tall window, then cut below the
page's last non-white row), and is measured: the document's scroll width against the window's
(wider means a reader scrolls sideways), and the elements that reach past the window's right edge.
`--expand` opens every collapsed section (the models' replies) first, in a copy of the page.
Chromium: Debian's `chromium` package (`apt-get install -y chromium`), or $CHROMIUM. It starts with
a fresh profile and no network features, and is stopped after each page.

`measure` (used by tests/test_report_screenshot.py) loads a copy of the page with a script added
that, once the page has loaded, writes the layout's measurements into the page; Chromium's
`--dump-dom` prints the page, and the measurements are read back from it. The report itself has
no script; only the measured copy does.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image, ImageChops

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars", "--force-device-scale-factor=1"]
MEASURE_ID = "report-screenshot-measure"
# Runs once the page has loaded (images decoded): the layout's width, the elements past the right
# edge (a <pre> scrolls inside itself and is not one), and the text a reader sees outside the
# models' replies (<pre>), into an element the dumped DOM carries back.
MEASURE_JS = """
window.addEventListener("load", () => {
  const width = window.innerWidth;
  const past = [];
  for (const el of document.body.querySelectorAll("*")) {
    const right = el.getBoundingClientRect().right;
    if (right > width + 0.5 && !el.closest("pre") && past.length < 20) {
      past.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className ? "." + el.className : "")
                + " right=" + Math.round(right));
    }
  }
  const copy = document.body.cloneNode(true);
  copy.querySelectorAll("pre, script").forEach(e => e.remove());
  const out = document.createElement("pre");
  out.id = "%s";
  out.textContent = JSON.stringify({scroll_width: document.documentElement.scrollWidth, inner_width: width,
                                    body_width: document.body.getBoundingClientRect().width, past_edge: past,
                                    text: copy.innerText || copy.textContent,
                                    images: [...document.images].map(i => i.naturalWidth > 0),
                                    headings: [...document.querySelectorAll("h1, h2, h3")].map(h => h.textContent)});
  document.body.appendChild(out);
});
""" % MEASURE_ID


class ShotError(RuntimeError):
    """Chromium failed on a page, or is not there."""


def find_chromium() -> str | None:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def chromium() -> str:
    found = find_chromium()
    if found is None:
        sys.exit("no Chromium found: `apt-get install -y chromium` (Debian), or set $CHROMIUM to its binary")
    return found


def page_of(arg: str) -> tuple[str, Path]:
    p = Path(arg)
    page = p / "report.html" if p.is_dir() else p
    if not page.is_file():
        sys.exit(f"{arg}: no report.html there (run the pipeline's 05_report first)")
    name = p.name if p.is_dir() else p.parent.name
    return name, page.resolve()


def trim(png: Path, margin: int = 24) -> tuple[int, int]:
    """Cut the white space below the page's content; returns the final (width, height)."""
    img = Image.open(png).convert("RGB")
    bg = Image.new("RGB", img.size, (255, 255, 255))
    box = ImageChops.difference(img, bg).getbbox()
    if box is not None:
        img = img.crop((0, 0, img.width, min(img.height, box[3] + margin)))
    img.save(png)
    return img.size


def _expanded(page: Path, tmp: str) -> Path:
    copy = Path(tmp) / page.name
    copy.write_text(page.read_text(encoding="utf-8").replace("<details>", "<details open>"), encoding="utf-8")
    return copy


def _run(browser: str, args: list[str], tmp: str, width: int, height: int, timeout: float = 180):
    cmd = [browser, *FLAGS, f"--user-data-dir={Path(tmp) / 'profile'}", f"--window-size={width},{height}", *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise ShotError(f"chromium took more than {timeout:.0f}s on {args[-1]}") from e


def shoot(browser: str, page: Path, out: Path, width: int = 1280, height: int = 16000,
          expand: bool = False) -> tuple[int, int, float]:
    """A full-page PNG of `page` at `width` px: (width, height, seconds)."""
    with tempfile.TemporaryDirectory(prefix="report-shot-") as tmp:
        page = _expanded(page, tmp) if expand else page
        t0 = time.perf_counter()
        done = _run(browser, [f"--screenshot={out}", page.as_uri()], tmp, width, height)
        wall = time.perf_counter() - t0
    if done.returncode != 0 or not out.is_file():
        raise ShotError(f"chromium failed on {page} (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return (*trim(out), wall)


def measure(browser: str, page: Path, width: int = 1280, height: int = 900, expand: bool = False) -> dict:
    """What Chromium laid out for `page` in a window `width` px wide: `scroll_width` (wider than
    `inner_width`: the reader scrolls sideways), `past_edge` (the elements reaching past the right
    edge), `text` (what a reader sees, without the models' replies), `headings`, `images` (drawn or not)."""
    with tempfile.TemporaryDirectory(prefix="report-measure-") as tmp:
        src = (_expanded(page, tmp) if expand else page).read_text(encoding="utf-8")
        copy = Path(tmp) / "measured.html"
        script = f"<script>{MEASURE_JS}</script>"
        copy.write_text(src.replace("</body>", script + "</body>") if "</body>" in src else src + script,
                        encoding="utf-8")
        done = _run(browser, ["--dump-dom", copy.as_uri()], tmp, width, height)
    found = re.search(rf'<pre id="{MEASURE_ID}">(.*?)</pre>', done.stdout, re.S)
    if done.returncode != 0 or found is None:
        raise ShotError(f"chromium measured nothing on {page} (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(html.unescape(found.group(1)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pages", nargs="+", help="run folders (outputs/<run>) or report.html files")
    ap.add_argument("--out", default="report_screenshots", help="folder for the PNGs")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=16000, help="the window's height: taller than any page")
    ap.add_argument("--expand", action="store_true", help="open the collapsed replies before the screenshot")
    ap.add_argument("--check", action="store_true", help="exit 1 when a page is wider than --width")
    args = ap.parse_args(argv)
    browser = chromium()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    too_wide = 0
    for arg in args.pages:
        name, page = page_of(arg)
        out = out_dir / f"{name}{'_expanded' if args.expand else ''}.png"
        try:
            w, h, wall = shoot(browser, page, out, args.width, args.height, args.expand)
            m = measure(browser, page, args.width, expand=args.expand)
        except ShotError as e:
            sys.exit(str(e))
        fits = m["scroll_width"] <= m["inner_width"]
        too_wide += not fits
        print(f"{page} -> {out} ({w}x{h} px, {wall:.1f}s); laid out {m['scroll_width']} px wide in a "
              f"{m['inner_width']} px window" + ("" if fits else f": TOO WIDE, past the edge: {m['past_edge'][:5]}"))
    return 1 if args.check and too_wide else 0


if __name__ == "__main__":
    sys.exit(main())
