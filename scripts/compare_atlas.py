"""Compare streamproj's HTML view with Apple's embedding-atlas on the same two-class 2-D points.

For each size, writes a synthetic projection (``bench_plot.write_output``) and
the same rows as Parquet (``x``, ``y``, ``label`` as text), then times, the
repetitions interleaved: (a) ``streamproj plot OUT --output view.html`` (wall,
peak RSS, file size); (b) ``embedding-atlas PARQUET --x x --y y
--export-application DIR`` (wall, peak RSS, folder size); (c) embedding-atlas's
server, bound to 127.0.0.1, from its start until ``/data/metadata.json``
answers (then stopped); (d) in headless chromium, pages served from 127.0.0.1:
the view until ``window.streamproj.ready`` and a non-blank canvas, and the
exported application until its "N / N points" count shows, whether any of its
canvases draws within ``--timeout`` seconds, and the console errors it logs.

    python scripts/compare_atlas.py [--rows 1M,10M] [--repeats 3] [--atlas PATH]
        [--chromium /usr/bin/chromium] [--timeout 60] [--dir /tmp/streamproj-atlas]

Peak RSS is ``ru_maxrss`` of the tool's process, run from a small fresh
interpreter (so that the parent's own peak is not carried over exec).
"""

import argparse
import functools
import http.server
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

FLAGS = ["--enable-unsafe-webgpu"]  # WebGPU where chromium has an adapter for it
ENV = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")  # no model is needed
# distinct colours (RGBA) among every 97th pixel of a canvas, copied as drawImage sees it (any
# context: 2-D, WebGL, WebGPU); 1 is a blank canvas. Not a screenshot, which shows what lies over it
COLOURS = """window.colours = (c) => { const x = document.createElement('canvas');
  x.width = c.width; x.height = c.height; if (!c.width || !c.height) return 0;
  const g = x.getContext('2d'); g.drawImage(c, 0, 0); const d = g.getImageData(0, 0, c.width, c.height).data;
  const s = new Set(); for (let i = 0; i < d.length && s.size < 4; i += 4 * 97) s.add(d.slice(i, i + 4).join());
  return s.size; }"""
DRAWN = "() => [...document.querySelectorAll('canvas')].filter(c => colours(c) > 1).length"
VIEW_READY = ("() => { const s = window.streamproj, c = document.getElementById('sp-canvas');"
              " return !!(s && s.ready && c && colours(c) > 1); }")


def rows(text):
    """``1M,10M`` or ``200k,1000000`` -> [1000000, 10000000]."""
    scale = {"k": 10**3, "m": 10**6}
    return [int(float(t[:-1]) * scale[t[-1].lower()]) if t[-1].lower() in scale else int(t)
            for t in text.replace("_", "").split(",")]


def _measure(cmd):
    """Run ``cmd`` (in this fresh interpreter) and print its wall time and peak RSS as JSON."""
    t = time.perf_counter()
    res = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    wall = time.perf_counter() - t
    if res.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr[-1500:]}")
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({"wall": wall, "rss": rss}))


def measured(cmd):
    res = subprocess.run([sys.executable, __file__, "--measure", *cmd], capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(res.stderr)
    return json.loads(res.stdout.strip().splitlines()[-1])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def folder_size(path):
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def atlas_server(atlas, parquet, limit):
    """Seconds from the server's start until /data/metadata.json answers (None: not within limit)."""
    port = free_port()
    t = time.perf_counter()
    proc = subprocess.Popen([atlas, str(parquet), "--x", "x", "--y", "y", "--host", "127.0.0.1",
                             "--port", str(port), "--no-auto-port"], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while proc.poll() is None and time.perf_counter() - t < limit:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/metadata.json", timeout=2):
                    return time.perf_counter() - t
            except OSError:
                time.sleep(0.05)
        return None
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def serve(root):
    """An http.server thread serving ``root`` on 127.0.0.1; returns (server, base URL)."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def browse_view(browser, url, limit):
    """Seconds from navigation until the view is ready and its canvas is not blank (None: not in limit)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.add_init_script(COLOURS)
        t = time.perf_counter()
        page.goto(url)
        try:
            page.wait_for_function(VIEW_READY, timeout=limit * 1000)
        except PlaywrightTimeout:
            return None
        return time.perf_counter() - t
    finally:
        context.close()


def browse_atlas(browser, url, n, limit):
    """(seconds until "n / n points" shows or None, canvases drawn, canvases, [(kind, message)])."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    errors = []
    try:
        page = context.new_page()
        page.add_init_script(COLOURS)
        page.on("console", lambda m: errors.append(("console error", m.text)) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(("page error", str(e))))
        t, shown, drawn, canvases, want = time.perf_counter(), None, 0, 0, f"{n:,} / {n:,} points"
        page.goto(url)
        while time.perf_counter() - t < limit and not (shown and drawn):
            if shown is None and want in page.evaluate("document.body ? document.body.innerText : ''"):
                shown = time.perf_counter() - t
            canvases, drawn = page.evaluate("document.querySelectorAll('canvas').length"), page.evaluate(DRAWN)
            page.wait_for_timeout(250)
        notice = [("page text", t) for t in page.evaluate("document.body.innerText").splitlines() if "WebGPU" in t]
        return shown, drawn, canvases, errors + notice
    finally:
        context.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=rows, default=rows("1M,10M"), help="sizes, e.g. 1M,10M")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--atlas", default=shutil.which("embedding-atlas"), help="embedding-atlas executable")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--timeout", type=float, default=60, help="seconds to wait for a page")
    ap.add_argument("--dir", default="/tmp/streamproj-atlas")
    ap.add_argument("--measure", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.measure:
        _measure(args.measure)
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_plot import write_output
    from playwright.sync_api import sync_playwright

    atlas = args.atlas
    if not atlas or not shutil.which(atlas):
        print(f"embedding-atlas not found ({atlas or 'not on PATH'}; --atlas PATH): streamproj alone")
        atlas = None
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    server, base = serve(root)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=FLAGS)
            print(f"chromium {browser.version} headless, flags: {' '.join(FLAGS)}; "
                  f"{os.cpu_count()} CPUs; pages from {base}")
            for n in args.rows:
                compare(n, root / f"n{n}", base + f"/n{n}", atlas, browser, write_output, args)
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return 0


def compare(n, d, url, atlas, browser, write_output, args):
    d.mkdir(exist_ok=True)
    out, parquet, view, app = d / "out.zarr", d / "points.parquet", d / "view.html", d / "atlas"
    if not out.exists():
        write_output(out, n)
    if atlas and not parquet.exists():
        import pyarrow as pa
        import pyarrow.parquet as pq
        import zarr

        group = zarr.open_group(str(out), mode="r")
        z = group["coords"][:]
        pq.write_table(pa.table({"x": z[:, 0], "y": z[:, 1], "label": group["y"][:].astype(str)}),
                       parquet)
    r = {k: [] for k in ("sp", "sp rss", "ea", "ea rss", "server", "sp page", "ea count", "ea drawn")}
    errors, canvases = [], 0
    for _ in range(args.repeats):
        view.unlink(missing_ok=True)
        m = measured([sys.executable, "-m", "streamproj", "plot", str(out), "--output", str(view)])
        r["sp"].append(m["wall"])
        r["sp rss"].append(m["rss"])
        r["sp page"].append(browse_view(browser, f"{url}/view.html", args.timeout))
        if atlas:
            shutil.rmtree(app, ignore_errors=True)
            m = measured([atlas, str(parquet), "--x", "x", "--y", "y", "--export-application", str(app)])
            r["ea"].append(m["wall"])
            r["ea rss"].append(m["rss"])
            r["server"].append(atlas_server(atlas, parquet, 300))
            shown, drawn, canvases, errs = browse_atlas(browser, f"{url}/atlas/index.html", n, args.timeout)
            r["ea count"].append(shown)
            r["ea drawn"].append(drawn)
            errors += errs

    def line(label, key, unit="s", fmt="{:.2f}"):
        vals = r[key]
        if not vals:
            return
        show = lambda v: "none" if v is None else fmt.format(v)  # noqa: E731
        got = [v for v in vals if v is not None]
        med = show(statistics.median(got) if got else None)
        print(f"  {label:66s} {med:>8s} {unit:3s} (all: {', '.join(show(v) for v in vals)})")

    print(f"\nrows {n:,}, {args.repeats} interleaved repeat(s), medians:")
    line("streamproj plot -> view.html: wall", "sp")
    line("streamproj plot: peak RSS", "sp rss", "MiB", "{:.0f}")
    print(f"  {'streamproj view.html: file size':66s} {view.stat().st_size / 2**20:8.1f} MiB")
    line("embedding-atlas --export-application: wall", "ea")
    line("embedding-atlas --export-application: peak RSS", "ea rss", "MiB", "{:.0f}")
    if atlas:
        print(f"  {'embedding-atlas export: folder size':66s} {folder_size(app) / 2**20:8.1f} MiB")
    line("embedding-atlas server: start until /data/metadata.json", "server")
    line("chromium, streamproj view: ready, canvas non-blank", "sp page")
    line(f'chromium, embedding-atlas export: "{n:,} / {n:,} points"', "ea count")
    line(f"chromium, embedding-atlas export: canvases drawn in {args.timeout:g} s", "ea drawn",
         f"of {canvases}", "{:g}")
    for kind, message in dict.fromkeys(errors):  # verbatim, each once
        print(f"    embedding-atlas {kind}: {message[:300]}")


if __name__ == "__main__":
    sys.exit(main())
