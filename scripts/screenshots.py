"""Make the README's pictures: run ``streamproj demo`` and photograph its HTML view.

Writes ``docs/demo.png`` (the demo's static picture), ``docs/view.png``
(the view in Debian's headless chromium, hovering a cell next to the
boundary so that the per-class counts show) and ``docs/view-stretched.png``
(the same with z[0] stretched by the view's ``x`` key).

    python scripts/screenshots.py [--rows 200000] [--dir /tmp/streamproj-shots]
"""

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--dir", default="/tmp/streamproj-shots")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = ap.parse_args(argv)
    work = Path(args.dir)
    shutil.rmtree(work, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "streamproj", "demo", str(work), "--rows",
                    str(args.rows)], check=True)
    shutil.copyfile(work / "demo.png", DOCS / "demo.png")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium)
        page = browser.new_page(viewport={"width": 1200, "height": 760})
        page.goto((work / "view.html").as_uri())
        page.wait_for_function("window.streamproj && window.streamproj.ready", timeout=60_000)
        box = page.locator("#sp-canvas").bounding_box()
        # hover just left of the boundary z[0] = 0, a little above the middle
        x, y = page.evaluate("() => { const s = window.streamproj.state();"
                             " return window.streamproj.toScreen(-1.5 / s.s, s.cy); }")
        page.mouse.move(box["x"] + x, box["y"] + y - 40)
        page.wait_for_timeout(300)
        page.screenshot(path=str(DOCS / "view.png"))
        # the same view with z[0] stretched to fill the plot (key x), hovering the same place
        page.keyboard.press("x")
        page.wait_for_timeout(300)
        x, y = page.evaluate("() => { const s = window.streamproj.state();"
                             " return window.streamproj.toScreen(-1.5 / s.s, s.cy); }")
        page.mouse.move(box["x"] + x, box["y"] + y - 40)
        page.wait_for_timeout(300)
        page.screenshot(path=str(DOCS / "view-stretched.png"))
        browser.close()
    print(f"wrote {DOCS / 'demo.png'}, {DOCS / 'view.png'} and {DOCS / 'view-stretched.png'} "
          f"from {args.rows:,} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
