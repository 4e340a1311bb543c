// streamproj interactive view: a per-class density pyramid drawn on a canvas.
// No libraries and no network: the data is embedded in #sp-data (deflated,
// base64) and inflated with the browser's own DecompressionStream.
(function () {
  "use strict";
  const M = JSON.parse(document.getElementById("sp-data").textContent);
  const B = M.names.length;
  // class names are the data's labels, put into the legend's and the hover's HTML: as text
  // (a label "<b>x</b>" was drawn bold as "x", and "<img onerror=...>" ran script)
  const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  const escape = (n) => String(n).replace(/[&<>"']/g, (c) => ESC[c]);
  const NAMES = M.names.map(escape);
  const CLASS_NAMES = (M.points.classes || []).map(escape);  // the classes "other" holds, sampled
  const MIN_ALPHA = 0.25;
  const PAD = { l: 64, r: 12, t: 10, b: 44 };
  const api = { ready: false, errors: [] };
  window.streamproj = api;

  async function inflate(b64) {
    const bin = atob(b64);
    const u8 = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) u8[i] = bin.charCodeAt(i);
    const stream = new Blob([u8]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Response(stream).arrayBuffer();
  }
  const TYPED = { u1: Uint8Array, u2: Uint16Array, u4: Uint32Array, f8: Float64Array };

  function rgb(hex) {
    return [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  }
  const colors = M.colors.map(rgb);
  const hidden = new Array(B).fill(false);
  // the fine grid's levels (coarsest first) and, where a few far rows set the extent, an
  // overview's: a coarser grid over the whole extent holding every row, drawn wherever a row
  // beyond the fine grid is in view (each level knows its grid's lower corner: x0, y0)
  let levels = [], overview = [], onlySum = null, points = null;
  const canvas = document.getElementById("sp-canvas");
  const ctx = canvas.getContext("2d");
  const off = document.createElement("canvas");
  const offctx = off.getContext("2d");
  let W = 0, H = 0, dpr = 1;
  // s: screen pixels per data unit along y; along x, s * k (k = 1: equal aspect, the default;
  // the stretch toggle makes k fill the width with the data and says so on the canvas)
  const view = { cx: 0, cy: 0, s: 1, k: 1 };
  let home = { cx: 0, cy: 0, s: 1 };

  function fmt(v) {
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(2);
    return (+v.toPrecision(4)).toString();
  }

  // tick labels in as many digits as tell a tick from its neighbours (each within a tenth of
  // the step): four read "2.33e+7" for every tick of z[1] about 2.3e7 spread 3, and zoomed in
  // 4,096x about 5, "5" for each
  function fmtTick(v, step) {
    for (let d = 4; d < 17; d++) {
      const a = Math.abs(v);
      const text = a !== 0 && (a < 1e-3 || a >= 1e5)
        ? v.toExponential(d - 2).replace(/\.?0+e/, "e") : (+v.toPrecision(d)).toString();
      if (!(step > 0) || Math.abs(+text - v) <= 0.1 * step) return text;
    }
    return String(v);
  }

  function plotRect() { return { l: PAD.l, t: PAD.t, w: W - PAD.l - PAD.r, h: H - PAD.t - PAD.b }; }
  function toScreen(x, y) {
    const r = plotRect();
    return [r.l + r.w / 2 + (x - view.cx) * view.s * view.k, r.t + r.h / 2 - (y - view.cy) * view.s];
  }
  function toData(px, py) {
    const r = plotRect();
    return [view.cx + (px - r.l - r.w / 2) / (view.s * view.k), view.cy - (py - r.t - r.h / 2) / view.s];
  }

  // screen pixels of a grid's cell's shorter side (a cell is cw x ch in data units)
  function cellPx(g) { return Math.min(g.cw * view.s * view.k, g.ch * view.s); }

  // What is drawn: level l's cells merged mx along x or my along y. A cell's sides on screen
  // differ by the stretch (x drawn k times y) and by its own shape (a thin cloud's cells are
  // finer across it). Cells a pixel across and many long draw streaks, so the shorter side is
  // merged (by powers of two, at most until square) until it is SHORT_SIDE device pixels or
  // the longer side's length; then the finest level whose merged cells are a device pixel a
  // side. Past the finest level a short side already SHORT_SIDE px is left as it is: merging
  // it up to the long side's 180 px threw away detail the cells hold.
  const SHORT_SIDE = 8;
  // the cells of grid g that meet the plot: [ix0, ix1) x [iy0, iy1), within the grid (empty
  // where none does)
  function cellsInView(g) {
    const r = plotRect();
    const [dx0, dy1] = toData(r.l, r.t), [dx1, dy0] = toData(r.l + r.w, r.t + r.h);
    const clamp = (v, n) => Math.max(0, Math.min(n, v));
    return [clamp(Math.floor((dx0 - g.x0) / g.cw), g.gx), clamp(Math.ceil((dx1 - g.x0) / g.cw), g.gx),
      clamp(Math.floor((dy0 - g.y0) / g.ch), g.gy), clamp(Math.ceil((dy1 - g.y0) / g.ch), g.gy)];
  }

  // the overview where a row beyond the fine grid lies in view (its finest cells that hold one,
  // summed over the view's cells from a summed-area table), else the fine grid
  function tierInView() {
    if (!overview.length) return levels;
    const f = overview[overview.length - 1], [ix0, ix1, iy0, iy1] = cellsInView(f);
    const at = (ix, iy) => onlySum[ix * (f.gy + 1) + iy];
    const beyond = at(ix1, iy1) - at(ix0, iy1) - at(ix1, iy0) + at(ix0, iy0);
    return beyond > 0 ? overview : levels;
  }

  function choose(spread = true) {
    const list = tierInView();
    const px = view.s * view.k * dpr, py = view.s * dpr;
    const sx = list[0].cw * px, sy = list[0].ch * py;  // (every level's ratio)
    const m = 2 ** Math.round(Math.log2(Math.max(sx, sy) / Math.min(sx, sy)));
    // at most a coarsest cell's worth (2^l along each side at level l): its edges, z[0] = 0
    // among them for two classes, stay edges, so no merged cell mixes the two sides
    const factor = (short, long, most) => {
      let f = 1;
      while (f < most && short * f < Math.min(long, SHORT_SIDE)) f *= 2;
      return f;
    };
    const merge = (lv) => {
      const cx = lv.cw * px, cy = lv.ch * py;
      return { mx: cx < cy ? factor(cx, cy, Math.min(m, lv.gx / list[0].gx)) : 1,
        my: cy < cx ? factor(cy, cx, Math.min(m, lv.gy / list[0].gy)) : 1 };
    };
    const tier = list === levels ? "fine" : "overview";
    let best = { tier, l: 0, ...merge(list[0]) };
    for (let l = 1; l < list.length; l++) {
      const { mx, my } = merge(list[l]), lv = list[l];
      if (Math.min(lv.cw * mx * px, lv.ch * my * py) >= 1) best = { tier, l, mx, my };
    }
    // sparse rows: coarser levels (see SPREAD_PX), never where the sampled rows are drawn
    const sized = best.l;
    while (spread && best.l > 0) {
      const lv = list[best.l], c = { tier, l: best.l - 1, ...merge(list[best.l - 1]) }, up = list[c.l];
      if (Math.max(up.cw * c.mx * px, up.ch * c.my * py) > SPREAD_PX) break;
      const css = Math.min(lv.cw * best.mx * view.s * view.k, lv.ch * best.my * view.s);
      if (best.l === list.length - 1 && css >= POINTS_FROM) break;  // (drawPoints' test)
      if (!sparse(best)) break;
      best = c;
    }
    return { ...best, sized };
  }

  // Dust: few rows over cells a pixel or two across draw scattered single pixels, barely
  // seen. As datashader's dynspread, the rows in view are sparse where fewer than half the
  // cells that hold a shown row have one among their 8 neighbours; choose() then draws the
  // next coarser level (each doubles a cell's side, its counts exact as any level's) while
  // that holds and its cells are at most SPREAD_PX device pixels a side: 8, about dynspread's
  // largest spread (max_px 3, a pixel grown to 7 x 7), so that a cell still reads as a
  // place, not a block. Dense data are not sparse at the pixel-size level: their choice is
  // as it was. The measure is of the cells in view only (about one a device pixel at most),
  // kept for the view drawn (a hover asks again), and stops once the answer is settled.
  const SPREAD_PX = 8, SPARSE = 0.5;
  const sparseSeen = new Map();
  // the cells render has just coloured (the pixel-size level's): measured from them if asked
  let coloured = null;
  function sparseKey(g, box) { return `${g.tier},${g.l},${g.mx},${g.my},${box.join()},${hidden.join()}`; }
  function sparse(at) {
    const g = gridOf(at), box = cellsInView(g), key = sparseKey(g, box);
    if (sparseSeen.has(key)) return sparseSeen.get(key);
    if (coloured && coloured.key === key) {
      const c = coloured.cells;
      return noteSparse(key, c.shown, c.nx, c.ny, c.held);
    }
    const [ix0, ix1, iy0, iy1] = box, nx = ix1 - ix0, ny = iy1 - iy0, plane = g.gx * g.gy;
    const occ = new Uint8Array(Math.max(0, nx * ny));
    for (let k = 0; k < B; k++) {
      if (hidden[k]) continue;
      for (let ix = 0; ix < nx; ix++) {
        const from = k * plane + (ix0 + ix) * g.gy + iy0, to = ix * ny;
        for (let iy = 0; iy < ny; iy++) if (g.counts[from + iy]) occ[to + iy] = 1;
      }
    }
    let n = 0;
    for (let q = 0; q < occ.length; q++) n += occ[q];
    return noteSparse(key, occ, ny, nx, n);
  }
  // a: the cells in view, h rows of w, non-zero where a shown row is; n of them. Those with
  // a neighbour are counted until at least half of them have one, or more than half cannot.
  function noteSparse(key, a, w, h, n) {
    let near = 0, alone = 0;
    for (let y = 0; y < h && near < SPARSE * n && alone <= (1 - SPARSE) * n; y++) {
      const up = y > 0, down = y < h - 1;
      for (let x = 0, q = y * w; x < w; x++, q++) {
        if (!a[q]) continue;
        const left = x > 0, right = x < w - 1;
        if ((left && (a[q - 1] || (up && a[q - w - 1]) || (down && a[q + w - 1]))) ||
            (right && (a[q + 1] || (up && a[q - w + 1]) || (down && a[q + w + 1]))) ||
            (up && a[q - w]) || (down && a[q + w])) near++;
        else alone++;
      }
    }
    const out = n > 0 && near < SPARSE * n;
    if (sparseSeen.size >= 8) sparseSeen.delete(sparseSeen.keys().next().value);
    sparseSeen.set(key, out);
    return out;
  }

  // A level's cells merged mx x my (powers of two, so they divide its sides): sums of its
  // counts, exact as the level's own are (a merged cell's edges are the level's edges).
  // Derived on first use and kept, a few at a time.
  const merged = new Map();
  function gridOf({ tier, l, mx, my }) {
    const lv = (tier === "overview" ? overview : levels)[l];
    if (mx === 1 && my === 1) return lv;
    const key = `${tier},${l},${mx},${my}`;
    if (merged.has(key)) return merged.get(key);
    const gx = lv.gx / mx, gy = lv.gy / my, plane = gx * gy, P = lv.gx * lv.gy, src = lv.counts;
    const sx = Math.log2(mx), sy = Math.log2(my);
    // sums may pass a narrow type's range: 32 bits unless the rows do
    const counts = new (src instanceof Float64Array || M.n >= 2 ** 32 ? Float64Array : Uint32Array)(B * plane);
    for (let k = 0; k < B; k++) {
      for (let ix = 0; ix < lv.gx; ix++) {
        const from = k * P + ix * lv.gy, to = k * plane + (ix >> sx) * gy;
        for (let iy = 0; iy < lv.gy; iy++) counts[to + (iy >> sy)] += src[from + iy];
      }
    }
    const g = { tier, l, mx, my, gx, gy, cw: lv.cw * mx, ch: lv.ch * my, x0: lv.x0, y0: lv.y0, counts };
    if (merged.size >= 4) merged.delete(merged.keys().next().value);
    merged.set(key, g);
    return g;
  }

  function resize() {
    dpr = window.devicePixelRatio || 1;
    const rect = canvas.getBoundingClientRect();
    W = rect.width; H = rect.height;
    canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
  }

  function resetView() {
    const r = plotRect();
    const ex = M.data_extent || M.extent;
    view.cx = (ex[0][0] + ex[0][1]) / 2; view.cy = (ex[1][0] + ex[1][1]) / 2;
    view.s = homeScale(view.k);
    home = { ...view };
  }
  function homeScale(k) {
    const r = plotRect(), ex = M.data_extent || M.extent;
    return Math.min(r.w / ((ex[0][1] - ex[0][0]) * k), r.h / (ex[1][1] - ex[1][0]));
  }

  // x stretched against y so that the data's extent fills the plot (or back to equal aspect);
  // the zoom and the centre are kept
  // a factor as said: two decimals below 1.095 (a stretch of 4 % read "1.0x", equal aspect)
  function times(v) { return v < 1.095 ? v.toFixed(2) : v.toFixed(1); }
  function aspectNote() {
    if (view.k === 1) return "";
    return view.k > 1 ? `x magnified ${times(view.k)}x against y` : `y magnified ${times(1 / view.k)}x against x`;
  }
  function stretch(on) {
    const r = plotRect(), ex = M.data_extent || M.extent;
    const fill = (r.w / (ex[0][1] - ex[0][0])) / (r.h / (ex[1][1] - ex[1][0]));
    const k = on === undefined ? (view.k === 1 ? fill : 1) : (on ? fill : 1);
    const h = homeScale(k);
    view.s *= h / home.s; view.k = k; home.s = h; home.k = k;
    const b = document.getElementById("sp-stretch");
    b.textContent = view.k === 1 ? "x: equal" : view.k > 1 ? `x: stretched ${times(view.k)}x` : `x: squeezed ${times(1 / view.k)}x`;
    b.classList.toggle("on", view.k !== 1);
    render();
  }

  function niceTicks(lo, hi, n) {
    const span = hi - lo, step0 = span / n;
    const mag = Math.pow(10, Math.floor(Math.log10(step0)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => span / s <= n) || 10 * mag;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-12 * span; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    return out;
  }

  // The cells of grid lv in view as an image of a pixel each: colours mixed by count and
  // opacities against vmax. Also: each one's shown rows (shown, rows of nx) and how many
  // hold one (held), the rows in view.
  function colour(lv) {
    const box = cellsInView(lv), [ix0, ix1, iy0, iy1] = box;
    // the shading's scale: the densest cell in view (as datashader shades each view), so a
    // zoomed-in dense core is not flat
    let vmax = 1, rowsInView = 0, held = 0;
    const nx = Math.max(0, ix1 - ix0), ny = Math.max(0, iy1 - iy0), shown = new Float64Array(nx * ny);
    if (!nx || !ny) return { box, nx, ny, shown, held, vmax, rowsInView, img: null };
    const plane = lv.gx * lv.gy, img = offctx.createImageData(nx, ny), px = img.data;
    // colours first, each cell's shown rows kept, then the opacities against vmax
    for (let ix = ix0; ix < ix1; ix++) {
      for (let iy = iy0; iy < iy1; iy++) {
        const c = ix * lv.gy + iy;
        let t = 0, rr = 0, gg = 0, bb = 0;
        for (let k = 0; k < B; k++) {
          if (hidden[k]) continue;
          const v = lv.counts[k * plane + c];
          if (v) { t += v; rr += v * colors[k][0]; gg += v * colors[k][1]; bb += v * colors[k][2]; }
        }
        if (!t) continue;
        const q = (ny - 1 - (iy - iy0)) * nx + (ix - ix0), o = 4 * q;
        px[o] = rr / t; px[o + 1] = gg / t; px[o + 2] = bb / t;
        shown[q] = t;
        held++;
        rowsInView += t;
        if (t > vmax) vmax = t;
      }
    }
    const logmax = Math.log1p(vmax);
    for (let q = 0; q < shown.length; q++) {
      if (shown[q]) px[4 * q + 3] = 255 * Math.min(1, MIN_ALPHA + (1 - MIN_ALPHA) * Math.log1p(shown[q]) / logmax);
    }
    return { box, nx, ny, shown, held, vmax, rowsInView, img };
  }

  function render() {
    const r = plotRect();
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, H);
    // the pixel-size level's cells first: choose() measures them as they are (no second
    // pass over the cells in view for dense data); a coarser level's where they are sparse
    const sized = choose(false);
    let lv = gridOf(sized), cells = colour(lv);
    coloured = { key: sparseKey(lv, cells.box), cells };
    const chosen = choose();
    coloured = null;
    if (chosen.l !== sized.l) { lv = gridOf(chosen); cells = colour(lv); }
    const li = lv.l, cw = lv.cw, ch = lv.ch, x0 = lv.x0, y0 = lv.y0;
    const { vmax, rowsInView, nx, ny, img } = cells, [ix0, , , iy1] = cells.box;
    ctx.save();
    ctx.beginPath(); ctx.rect(r.l, r.t, r.w, r.h); ctx.clip();
    if (img) {
      off.width = nx; off.height = ny;
      offctx.putImageData(img, 0, 0);
      const [sx, sy] = toScreen(x0 + ix0 * cw, y0 + iy1 * ch);
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(off, 0, 0, nx, ny, sx, sy, nx * cw * view.s * view.k, ny * ch * view.s);
    }
    drawPoints(lv);
    boundaryKey(drawBoundary(r));
    ctx.restore();
    drawAxes(r);
    drawAspect(r);
    updateKey(lv, vmax);
    api.level = li; api.tier = lv.tier; api.vmax = vmax;
    document.getElementById("sp-status").textContent =
      (view.k !== 1 ? `${aspectNote()} · ` : "") +
      `zoom ${fmt(view.s / home.s)}x · ${lv.tier === "overview" ? `overview level ${li + 1} of ${overview.length}`
        : `level ${li + 1} of ${levels.length}`} (${lv.gx} x ${lv.gy} cells, cell ${cellText(lv)})` +
      // coarser than the screen's pixels allow: sparse rows (choose)
      (li < chosen.sized ? ` · ${chosen.sized - li} level${chosen.sized - li > 1 ? "s" : ""} coarser: rows sparse` : "") +
      // the rows the cells in view hold beside the points drawn: at deep zoom a few dozen
      // sampled rows stand for thousands, and the page says so
      (pointsShown ? ` · ${pointsShown.toLocaleString()} sampled rows drawn` +
        `${pointsShown < pointsInView ? ` (${pointsInView.toLocaleString()} sampled in view)` : ""}` +
        ` of about ${rowsInView.toLocaleString()} rows in view` : "");
    api.rowsInView = rowsInView;
    // the hover's cell and counts follow a zoom, a stretch or a pan under a still pointer
    if (lastHover && tip.style.display !== "none") hover(...lastHover);
  }

  // The sampled rows show where rows lie inside a cell: only once the finest cells are
  // POINTS_FROM px a side (smaller, the cells say as much), fading in up to twice that, as
  // small dots that leave the cells visible, and at most POINTS_CAP at once.
  // (a dot of 2 px with a dark ring: smaller, on a cell of its own colour, it was not seen)
  const POINTS_FROM = 8, POINTS_CAP = 2000, DOT = 2;
  let pointsShown = 0, pointsInView = 0, drawnPoints = [], pointsOn = true;
  function drawPoints(g) {
    pointsShown = 0; pointsInView = 0; drawnPoints = [];
    // (at the finest level of the grid drawn: the overview's too, where far rows are in view)
    if (!points || !pointsOn || g.l < (g.tier === "overview" ? overview : levels).length - 1) return;
    const fine = cellPx(g);
    if (fine < POINTS_FROM) return;
    const r = plotRect(), inView = [];
    for (let p = 0; p < points.count; p++) {
      if (hidden[points.bucket[p]]) continue;
      const [sx, sy] = toScreen(points.xy[2 * p], points.xy[2 * p + 1]);
      if (sx >= r.l && sx <= r.l + r.w && sy >= r.t && sy <= r.t + r.h) inView.push(p);
    }
    pointsInView = inView.length;
    // over the cap: an even stride through them (in row order, which the hash made unrelated
    // to place), so every part of the screen is thinned alike
    const step = Math.max(1, inView.length / POINTS_CAP);
    ctx.globalAlpha = Math.min(1, fine / POINTS_FROM - 0.5);
    ctx.strokeStyle = "rgba(0,0,0,0.8)"; ctx.lineWidth = 0.9;
    for (let i = 0; i < inView.length && drawnPoints.length < POINTS_CAP; i += step) {
      const p = inView[Math.floor(i)], k = points.bucket[p];
      const [sx, sy] = toScreen(points.xy[2 * p], points.xy[2 * p + 1]);
      ctx.fillStyle = M.colors[k];
      ctx.beginPath(); ctx.arc(sx, sy, DOT, 0, 2 * Math.PI); ctx.fill(); ctx.stroke();
      drawnPoints.push(p);
    }
    ctx.globalAlpha = 1;
    pointsShown = drawnPoints.length;
  }

  // Each class's region of the box [x0, x1] x [y0, y1] where its score x A[0][k] + y A[1][k]
  // + b[k] is the highest is a convex polygon: the box cut by the most violated half-plane
  // s_p >= s_q until none is violated at any vertex. The edges two classes share are the
  // boundary, returned once each as [start, end]. A few cuts per class whatever K is (a
  // pair-by-pair search along sampled lines was O(K^3)); streamproj.plot.picture does the same.
  function tieSegments(x0, x1, y0, y1, A, bv) {
    const K = bv.length, out = [];
    const mx = Math.max(Math.abs(x0), Math.abs(x1)), my = Math.max(Math.abs(y0), Math.abs(y1));
    const size = bv.map((c, k) => mx * Math.abs(A[0][k]) + my * Math.abs(A[1][k]) + Math.abs(c));
    for (let p = 0; p < K; p++) {
      let V = [[x0, y0], [x1, y0], [x1, y1], [x0, y1]], by = [-1, -1, -1, -1];
      for (let cut = 0; cut < 4 * K + 4; cut++) {
        let worst = 0, wq = -1, wh = null;
        for (let q = 0; q < K; q++) {
          if (q === p) continue;
          const nx = A[0][p] - A[0][q], ny = A[1][p] - A[1][q], c = bv[p] - bv[q];
          const tol = 1e-12 * Math.max(size[p], size[q]);
          const h = V.map(([x, y]) => x * nx + y * ny + c);
          const least = Math.min(...h) + tol;
          if (least < worst) { worst = least; wq = q; wh = h; }
        }
        if (wq < 0) break;
        const W = [], wb = [];
        for (let e = 0; e < V.length; e++) {
          const f = (e + 1) % V.length, ha = wh[e], hc = wh[f];
          const at = () => { const t = ha / (ha - hc); return [V[e][0] + (V[f][0] - V[e][0]) * t, V[e][1] + (V[f][1] - V[e][1]) * t]; };
          if (ha >= 0) {
            W.push(V[e]); wb.push(by[e]);
            if (hc < 0) { W.push(at()); wb.push(wq); }  // leaves: the cut runs to where it comes back
          } else if (hc >= 0) { W.push(at()); wb.push(by[e]); }  // comes back in
        }
        V = W; by = wb;
        if (V.length < 3) { V = []; break; }
      }
      for (let e = 0; e < V.length; e++) {
        const a = V[e], f = V[(e + 1) % V.length];
        if (by[e] > p && (a[0] !== f[0] || a[1] !== f[1])) out.push([a, f]);
      }
    }
    return out;
  }

  // draws the boundary where it crosses the plot; says whether it did
  function drawBoundary(r) {
    ctx.strokeStyle = "#111"; ctx.lineWidth = 1.6;
    const b = M.boundary;
    let drawn = false;
    if (b.kind === "x") {
      const [sx] = toScreen(0, 0);
      ctx.beginPath(); ctx.moveTo(sx, r.t); ctx.lineTo(sx, r.t + r.h); ctx.stroke();
      drawn = sx >= r.l && sx <= r.l + r.w;
    } else if (b.kind === "y") {
      const [, sy] = toScreen(0, 0);
      ctx.beginPath(); ctx.moveTo(r.l, sy); ctx.lineTo(r.l + r.w, sy); ctx.stroke();
      drawn = sy >= r.t && sy <= r.t + r.h;
    } else if (b.kind === "regions") {
      // where the winning class of the linear rule changes: the edges between the classes'
      // winning polygons in the plot (exact, straight at any zoom; as the PNG draws them)
      const [x0, y1] = toData(r.l, r.t), [x1, y0] = toData(r.l + r.w, r.t + r.h);
      ctx.save(); ctx.beginPath(); ctx.rect(r.l, r.t, r.w, r.h); ctx.clip();
      if (b.exact === false) { ctx.setLineDash([4, 2]); ctx.lineWidth = 1.2; }  // a slice
      ctx.beginPath();
      for (const [a, e] of tieSegments(x0, x1, y0, y1, b.A, b.b)) {
        const [ax, ay] = toScreen(a[0], a[1]), [ex, ey] = toScreen(e[0], e[1]);
        ctx.moveTo(ax, ay); ctx.lineTo(ex, ey); drawn = true;
      }
      ctx.stroke(); ctx.restore();
    }
    return drawn;
  }

  // the legend's boundary entry names a line only while one is drawn (a slice zoomed into
  // one class's region drew none and still said "(slice)")
  let boundaryDrawn = null;
  function boundaryKey(drawn) {
    if (drawn === boundaryDrawn) return;
    boundaryDrawn = drawn;
    const b = M.boundary, SW = '<span class="sw" style="background:#111;height:3px;vertical-align:3px"></span>';
    document.getElementById("sp-boundary").innerHTML = b.kind === "none" ? "the boundary is not a line in this plane"
      : !drawn ? `<span class="note">no ${b.kind === "regions" ? "LDA boundary" : "boundary z[0] = 0"} in this view</span>`
      : b.kind !== "regions" ? `${SW}decision boundary z[0] = 0`
      : b.exact !== false ? `${SW}LDA boundaries in this plane`
      : `<span class="sw" style="background:repeating-linear-gradient(90deg,#111 0 4px,transparent 4px 6px);height:3px;vertical-align:3px"></span>LDA boundaries (slice)`
        + `<br><span class="note">where this plane through the centre cuts them: the rule also uses directions not shown</span>`;
  }

  function drawAxes(r) {
    ctx.strokeStyle = "#888"; ctx.lineWidth = 1; ctx.strokeRect(r.l, r.t, r.w, r.h);
    ctx.fillStyle = "#333"; ctx.font = "11px system-ui, sans-serif";
    const [dx0, dy1] = toData(r.l, r.t), [dx1, dy0] = toData(r.l + r.w, r.t + r.h);
    ctx.textAlign = "center"; ctx.textBaseline = "top";
    // each label inside the canvas and clear of the one before (long ones, "-5.00e-4", met
    // and the last was cut at the edge); its tick is drawn either way
    let lastRight = -Infinity;
    api.xTickLabels = [];
    const xs = niceTicks(dx0, dx1, Math.max(2, r.w / 90)), xStep = xs[1] - xs[0];
    for (const v of xs) {
      const [sx] = toScreen(v, 0);
      ctx.fillRect(sx, r.t + r.h, 1, 4);
      const text = fmtTick(v, xStep), w = ctx.measureText(text).width;
      const x = Math.min(Math.max(sx, w / 2 + 1), W - w / 2 - 1);
      if (x - w / 2 < lastRight + 6) continue;
      ctx.fillText(text, x, r.t + r.h + 5);
      lastRight = x + w / 2;
      api.xTickLabels.push({ text, value: v, left: x - w / 2, right: x + w / 2 });
    }
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    const ys = niceTicks(dy0, dy1, Math.max(2, r.h / 60)), yStep = ys[1] - ys[0];
    api.yTickLabels = [];
    for (const v of ys) {
      const [, sy] = toScreen(0, v), text = fmtTick(v, yStep);
      ctx.fillRect(r.l - 4, sy, 4, 1); ctx.fillText(text, r.l - 6, sy);
      api.yTickLabels.push({ text, value: v });
    }
    ctx.textAlign = "center"; ctx.textBaseline = "bottom";
    ctx.fillText(M.xlabel, r.l + r.w / 2, H - 2);
    ctx.save(); ctx.translate(12, r.t + r.h / 2); ctx.rotate(-Math.PI / 2); ctx.textBaseline = "middle";
    ctx.fillText(M.ylabel, 0, 0); ctx.restore();
  }

  // At equal aspect, data this many times narrower than the plot (along one side, against the
  // other) fill a sliver of it: the canvas says how to stretch them (the PNG draws a twin)
  const SLIVER = 3;
  function sliverHint() {
    if (view.k !== 1 || view.s > 2 * home.s) return "";
    const r = plotRect(), ex = M.data_extent || M.extent;
    const fill = (r.w / (ex[0][1] - ex[0][0])) / (r.h / (ex[1][1] - ex[1][0]));
    if (!(fill >= SLIVER || fill <= 1 / SLIVER)) return "";
    return fill > 1 ? `the data are ${fill.toFixed(0)}x narrower than the plot: press x to stretch x`
      : `the data are ${(1 / fill).toFixed(0)}x flatter than the plot: press x to stretch y`;
  }
  function drawAspect(r) {
    // a stretched picture says so on the canvas itself (a saved image keeps it)
    const note = aspectNote() || sliverHint();
    api.aspectText = note;
    if (!note) return;
    const colour = view.k !== 1 ? "#a00" : "#245";
    ctx.font = "bold 12px system-ui, sans-serif"; ctx.textAlign = "left"; ctx.textBaseline = "top";
    const w = ctx.measureText(note).width;
    ctx.fillStyle = "rgba(255,255,255,0.88)"; ctx.fillRect(r.l + 1, r.t + 1, w + 12, 20);
    ctx.strokeStyle = colour; ctx.lineWidth = 1; ctx.strokeRect(r.l + 1.5, r.t + 1.5, w + 11, 19);
    ctx.fillStyle = colour; ctx.fillText(note, r.l + 7, r.t + 5);
  }

  function cellText(g) { return g.cw === g.ch ? fmt(g.cw) : `${fmt(g.cw)} x ${fmt(g.ch)}`; }

  // the key of the shading as drawn: 1 row to the densest cell in view (shown classes only)
  function updateKey(lv, vmax) {
    const key = document.getElementById("sp-key"), kc = key.getContext("2d");
    const logmax = Math.log1p(vmax);
    kc.clearRect(0, 0, key.width, key.height);
    for (let i = 0; i < key.width; i++) {
      // 1 row per cell at the left end (the labels' "1"; white, 0 rows, is not on the key)
      const t = Math.exp((i / (key.width - 1)) * Math.log(Math.max(vmax, 1)));
      const a = Math.min(1, MIN_ALPHA + (1 - MIN_ALPHA) * Math.log1p(t) / logmax);
      kc.fillStyle = `rgba(51,51,51,${a})`; kc.fillRect(i, 0, 1, key.height);
    }
    document.getElementById("sp-keytitle").textContent = `rows per cell in view (cell ${fmt(lv.cw)} x ${fmt(lv.ch)}); colour = classes mixed by count`;
    document.getElementById("sp-keylabels").innerHTML = `<span>1</span><span>${Math.round(Math.sqrt(vmax)).toLocaleString()}</span><span>${vmax.toLocaleString()}</span>`;
  }

  // the cell drawn under (px, py): its level, its place in the merged grid and the merging
  // (level cells ix * mx .. (ix + 1) * mx - 1 by iy * my ..), its per-class counts
  function cellAt(px, py) {
    const lv = gridOf(choose()), cw = lv.cw, ch = lv.ch;
    const [x, y] = toData(px, py);
    const ix = Math.floor((x - lv.x0) / cw), iy = Math.floor((y - lv.y0) / ch);
    const at = { tier: lv.tier, level: lv.l, mx: lv.mx, my: lv.my, ix, iy, x, y, x0: lv.x0, y0: lv.y0,
      cell: cw, cellY: ch, counts: null };
    if (ix < 0 || iy < 0 || ix >= lv.gx || iy >= lv.gy) return at;
    const plane = lv.gx * lv.gy, counts = [];
    for (let k = 0; k < B; k++) counts.push(Number(lv.counts[k * plane + ix * lv.gy + iy]));
    return { ...at, counts };
  }

  // within the overview's grid (off the fine grid, where the fine grid is drawn, no row lies)
  function inOverview(x, y) {
    if (!overview.length) return false;
    const f = overview[overview.length - 1];
    return x >= f.x0 && x < f.x0 + f.gx * f.cw && y >= f.y0 && y < f.y0 + f.gy * f.ch;
  }

  function nearestPoint(px, py) {
    let best = -1, bd = 36;
    for (const p of drawnPoints) {
      const [sx, sy] = toScreen(points.xy[2 * p], points.xy[2 * p + 1]);
      const d = (sx - px) ** 2 + (sy - py) ** 2;
      if (d < bd) { bd = d; best = p; }
    }
    return best;
  }

  const tip = document.getElementById("sp-tip");
  let lastHover = null;  // where the pointer is over the canvas, or null
  function hover(px, py) {
    lastHover = [px, py];
    const r = plotRect();
    if (px < r.l || px > r.l + r.w || py < r.t || py > r.t + r.h) { tip.style.display = "none"; api.hover = null; return; }
    const c = cellAt(px, py);
    api.hover = c;
    let html = "";
    const p = nearestPoint(px, py);
    if (p >= 0) {
      // its own class, where "other" holds it (the hover names every class)
      const named = points.cls && points.cls[p] ? `${CLASS_NAMES[points.cls[p] - 1]} (${NAMES[points.bucket[p]]})` : NAMES[points.bucket[p]];
      html += `<b>row ${points.row[p].toLocaleString("en-US", { useGrouping: false })}</b> · ${named}<br>` +
        `z = (${fmt(points.xy[2 * p])}, ${fmt(points.xy[2 * p + 1])})<hr style="margin:3px 0">`;
      api.hoverRow = points.row[p];
    } else api.hoverRow = null;
    if (c.counts) {
      // edges as multiples of the cell from the extent's corner; one within rounding of 0
      // (the boundary is a cell edge) reads 0, not 1e-16
      const edge = (v, w) => (Math.abs(v) < 1e-9 * w ? 0 : v);
      const x = edge(c.x0 + c.ix * c.cell, c.cell), y = edge(c.y0 + c.iy * c.cellY, c.cellY);
      // (in digits that tell the edges apart: a cell of 1e-3 at 2.3e7 was "2.33e+7 to 2.33e+7")
      html += `cell x ${fmtTick(x, c.cell)} to ${fmtTick(edge(c.x0 + (c.ix + 1) * c.cell, c.cell), c.cell)}, ` +
        `y ${fmtTick(y, c.cellY)} to ${fmtTick(edge(c.y0 + (c.iy + 1) * c.cellY, c.cellY), c.cellY)}<table>`;
      // the classes present in the cell, largest first (a cell of 200 classes holds a few)
      const present = [];
      c.counts.forEach((v, k) => { if (v) present.push(k); });
      present.sort((a, b) => c.counts[b] - c.counts[a]);
      // the total is of the classes drawn (as the shading is); hidden ones are listed apart
      let total = 0, hiddenRows = 0;
      present.forEach((k) => {
        const v = c.counts[k];
        if (hidden[k]) hiddenRows += v; else total += v;
        html += `<tr data-bucket="${k}"${hidden[k] ? ' style="opacity:0.45"' : ""}><td><span class="sw" style="background:${M.colors[k]}"></span>${NAMES[k]}${hidden[k] ? " (hidden)" : ""}</td><td class="n" data-count="${v}">${v.toLocaleString()}</td></tr>`;
      });
      html += `<tr data-total="${total}" data-hidden="${hiddenRows}"><td><b>${hiddenRows ? "total shown" : "total"}</b></td><td class="n"><b>${total.toLocaleString()}</b>` +
        `${hiddenRows ? ` (+${hiddenRows.toLocaleString()} hidden)` : ""}</td></tr></table>`;
    } else html += c.tier === "fine" && inOverview(c.x, c.y) ? "no rows here" : "outside the stored extent";
    tip.innerHTML = html;
    tip.style.display = "block";
    // beside the pointer, flipped to its left or above it where it would leave the canvas
    const tw = tip.offsetWidth, th = tip.offsetHeight;
    const left = px + 14 + tw <= W ? px + 14 : px - 14 - tw;
    const top = py + 14 + th <= H ? py + 14 : py - 14 - th;
    tip.style.left = Math.max(0, Math.min(left, W - tw)) + "px";
    tip.style.top = Math.max(0, Math.min(top, H - th)) + "px";
  }

  function zoom(f, px, py) {
    const [x, y] = toData(px, py);
    view.s = Math.max(home.s / 4, Math.min(home.s * 65536, view.s * f));
    const [nx, ny] = toData(px, py);
    view.cx += x - nx; view.cy += y - ny;
    render();
  }

  function toggle(k) {
    hidden[k] = !hidden[k];
    const li = document.querySelector(`#sp-legend li[data-bucket="${k}"]`);
    if (li) li.classList.toggle("hidden", hidden[k]);
    render();
  }

  function pct(v) {
    const p = 100 * v / Math.max(M.n, 1);
    return v && p < 0.01 ? "< 0.01 %" : `${p.toFixed(2)} %`;
  }
  function outsideNote() {
    const nf = M.non_finite || 0, far = M.outside - nf;
    if (!M.outside) return "Every row lies inside the view's extent. ";
    return (far ? `${far.toLocaleString()} rows (${pct(far)}) lie outside the view's extent and are not drawn. ` : "") +
      (nf ? `${nf.toLocaleString()} rows (${pct(nf)}) have a non-finite z and are not drawn. ` : "") +
      "The legend gives each class's rows and how many are drawn. ";
  }

  function sampleNote() {
    const P = M.points, drawable = M.n - M.outside;
    const what = `Dots (once the finest cells are ${POINTS_FROM} px; row index on hover) are a sample`;
    if (P.count >= drawable) return what + ` that holds every row. `;
    return what + `: at most ${P.per_tile} rows in each of ${P.tiles} x ${P.tiles} tiles over the first view ` +
      `(rows beyond it share its edge tiles` +
      (P.far_tiles ? `; the rows beyond the finest cells, in ${(P.far_tiles ** 2).toLocaleString()} tiles of their own, by overview cell` : "") + `) ` +
      `(${P.count.toLocaleString()} of ${drawable.toLocaleString()} rows), classes as mixed in the tile. ` +
      `Dense areas are thinned and sparse ones kept whole, so the dots are not proportional to the rows ` +
      `or to class sizes; the cells are. `;
  }

  function setup() {
    document.getElementById("sp-title").textContent = M.title;
    document.getElementById("sp-subtitle").textContent = M.subtitle;
    const ul = document.getElementById("sp-legend");
    const totals = M.totals || M.rows;
    NAMES.forEach((name, k) => {
      if (!totals[k] && k === B - 1) return;
      const li = document.createElement("li");
      li.dataset.bucket = k;
      // the class's rows; where some lie outside the extent (or are not finite), how many are drawn
      const all = Math.round(totals[k]), drawn = Math.round(M.rows[k]);
      const count = drawn === all ? all.toLocaleString()
        : `${all.toLocaleString()} rows, ${drawn.toLocaleString()} drawn`;
      if (drawn !== all) li.title = `${(all - drawn).toLocaleString()} of its rows lie outside the view's extent or have a non-finite z`;
      li.innerHTML = `<span class="sw" style="background:${M.colors[k]}"></span>${name} <span style="color:#666">(${count})</span>`;
      li.addEventListener("click", () => toggle(k));
      ul.appendChild(li);
    });
    const bl = document.createElement("li");
    bl.style.cursor = "default";
    bl.id = "sp-boundary";  // filled as each view is drawn (boundaryKey)
    ul.appendChild(bl);
    const last = M.levels[M.levels.length - 1];
    document.getElementById("sp-notes").textContent =
      `${M.n.toLocaleString()} rows in ${M.levels.length} zoom levels (finest ${last.gx} x ${last.gy} cells` +
      (M.levels.length < M.levels_built ? `; ${M.levels_built - M.levels.length} finer levels over the file's size budget` : "") +
      `). ` + (M.overview ? `A few rows lie far out: the finest cells cover x ${fmt(M.extent[0][0])} to ${fmt(M.extent[0][1])}, ` +
        `y ${fmt(M.extent[1][0])} to ${fmt(M.extent[1][1])}, and where rows beyond that are in view an overview ` +
        `of ${M.overview.levels.length} coarser levels is drawn` +
        (M.overview.levels.length < M.overview.levels_built ? ` (${M.overview.levels_built - M.overview.levels.length} finer ones over the file's size budget)` : "") +
        ". " : "") + sampleNote() +
      outsideNote() +
      (M.classes_total > B - 1 ? `${M.classes_total.toLocaleString()} classes: the ${B - 1} largest have colours, ` +
        `the other ${(M.classes_total - B + 1).toLocaleString()} ${M.classes_total - B + 1 === 1 ? "class" : "classes"} ` +
        `(${(totals[B - 1] - (M.unknown || 0)).toLocaleString()} rows) are '${M.names[B - 1]}'. ` : "") +
      // "other" also holds labels none of the model's classes: said, not passed off as classes
      (M.unknown ? `${M.unknown.toLocaleString()} rows (${pct(M.unknown)}) have labels the model does not know ` +
        `(none of its ${M.classes_total.toLocaleString()} classes): they are '${M.names[B - 1]}'.` : "");
    let drag = null;
    canvas.addEventListener("wheel", (e) => {
      e.preventDefault();
      const rect = canvas.getBoundingClientRect();
      zoom(Math.pow(1.0015, -e.deltaY), e.clientX - rect.left, e.clientY - rect.top);
    }, { passive: false });
    canvas.addEventListener("pointerdown", (e) => { drag = { x: e.clientX, y: e.clientY }; canvas.setPointerCapture(e.pointerId); });
    canvas.addEventListener("pointerup", () => { drag = null; });
    canvas.addEventListener("pointermove", (e) => {
      const rect = canvas.getBoundingClientRect();
      if (drag) {
        view.cx -= (e.clientX - drag.x) / (view.s * view.k); view.cy += (e.clientY - drag.y) / view.s;
        drag = { x: e.clientX, y: e.clientY }; render();
      }
      hover(e.clientX - rect.left, e.clientY - rect.top);
    });
    canvas.addEventListener("pointerleave", () => { tip.style.display = "none"; lastHover = null; });
    canvas.addEventListener("dblclick", () => { resetView(); render(); });
    const centre = () => { const r = plotRect(); return [r.l + r.w / 2, r.t + r.h / 2]; };
    document.getElementById("sp-in").addEventListener("click", () => zoom(2, ...centre()));
    document.getElementById("sp-out").addEventListener("click", () => zoom(0.5, ...centre()));
    document.getElementById("sp-reset").addEventListener("click", () => { resetView(); render(); });
    document.getElementById("sp-stretch").addEventListener("click", () => stretch());
    document.addEventListener("keydown", (e) => {
      if (e.key !== "x" || e.ctrlKey || e.metaKey || e.altKey || e.target.tagName === "INPUT") return;
      stretch();
    });
    document.getElementById("sp-points").addEventListener("change", (e) => showPoints(e.target.checked));
    window.addEventListener("resize", () => { resize(); render(); });
  }

  async function load() {
    // each level stores only the box of cells that hold rows: put back in a grid of zeros
    const grid = async (lv) => {
      const box = new TYPED[lv.dtype](await inflate(lv.data)), [ox, oy, bx, by] = lv.box;
      const counts = new TYPED[lv.dtype](B * lv.gx * lv.gy);
      for (let b = 0; b < B; b++) {
        for (let ix = 0; ix < bx; ix++) {
          const from = (b * bx + ix) * by;
          counts.set(box.subarray(from, from + by), (b * lv.gx + ox + ix) * lv.gy + oy);
        }
      }
      return counts;
    };
    const unpack = (tier, x0, y0) => async (lv, l) => ({
      tier, l, mx: 1, my: 1, gx: lv.gx, gy: lv.gy, cw: lv.cw, ch: lv.ch, x0, y0,
      counts: await grid(lv),
    });
    levels = await Promise.all(M.levels.map(unpack("fine", M.extent[0][0], M.extent[1][0])));
    if (M.overview) {
      const o = M.overview;
      overview = await Promise.all(o.levels.map(unpack("overview", o.lower[0], o.lower[1])));
      const f = overview[overview.length - 1], only = new Uint8Array(await inflate(o.only));
      // summed-area table of the finest overview cells holding rows beyond the fine grid
      onlySum = new Uint32Array((f.gx + 1) * (f.gy + 1));
      for (let ix = 0; ix < f.gx; ix++) {
        for (let iy = 0; iy < f.gy; iy++) {
          onlySum[(ix + 1) * (f.gy + 1) + iy + 1] = only[ix * f.gy + iy] + onlySum[ix * (f.gy + 1) + iy + 1]
            + onlySum[(ix + 1) * (f.gy + 1) + iy] - onlySum[ix * (f.gy + 1) + iy];
        }
      }
    }
    const pts = M.points;
    // stored as float32 offsets from an origin in finest cells (a cloud far from 0 kept its digits),
    // or as float64 coordinates (bytes 8) where a far row lies past float32's range in cells
    const blob = await inflate(pts.xy);
    const offsets = pts.bytes === 8 ? new Float64Array(blob) : new Float32Array(blob);
    const xy = new Float64Array(offsets.length);
    for (let p = 0; p < pts.count; p++) {
      xy[2 * p] = pts.origin[0] + offsets[2 * p] * pts.unit[0];
      xy[2 * p + 1] = pts.origin[1] + offsets[2 * p + 1] * pts.unit[1];
    }
    points = {
      count: pts.count,
      xy,
      bucket: new Uint8Array(await inflate(pts.bucket)),
      row: new Float64Array(await inflate(pts.row)),
      // a row of a class in "other" (past --top): 1 + its place in pts.classes, else 0
      cls: pts.class ? new TYPED[`u${pts.class_bytes}`](await inflate(pts.class)) : null,
    };
    setup(); resize(); resetView(); render();
    api.boundary = M.boundary;
    api.tieSegments = tieSegments;
    api.ready = true;
  }

  function showPoints(on) {
    pointsOn = on;
    document.getElementById("sp-points").checked = on;
    render();
  }

  api.state = () => {
    const { tier, l, mx, my, sized } = choose();
    const lv = (tier === "overview" ? overview : levels)[l];
    const cellPx = [lv.cw * mx * view.s * view.k, lv.ch * my * view.s];  // on screen
    return { ...view, tier, level: l, sizedLevel: sized, merge: [mx, my], cellPx, levels: levels.length, overviewLevels: overview.length,
      hidden: hidden.slice(), pointsShown,
      pointsInView, pointsCap: POINTS_CAP, aspect: aspectNote(), boundaryDrawn };
  };
  api.stretch = stretch;
  api.showPoints = showPoints;
  api.zoom = zoom;
  api.panTo = (x, y) => { view.cx = x; view.cy = y; render(); };
  api.toggle = toggle;
  api.cellAt = cellAt;
  // a digest of a level's counts as the page holds them (tests compare it with the
  // pyramid's): their sum and two sums weighted by place, which any misplaced count changes
  api.countsDigest = (tier, l) => {
    const c = (tier === "overview" ? overview : levels)[l].counts;
    let sum = 0, w1 = 0, w2 = 0;
    for (let i = 0; i < c.length; i++) {
      if (c[i]) { sum += c[i]; w1 += c[i] * (i % 65521 + 1); w2 += c[i] * (i % 8191 + 1); }
    }
    return [c.length, sum, w1, w2];
  };
  api.plotRect = plotRect;
  api.home = () => ({ ...home });
  api.point = (p) => [points.xy[2 * p], points.xy[2 * p + 1], points.row[p]];
  api.toScreen = toScreen;
  api.toData = toData;
  load().catch((e) => { api.errors.push(String(e)); console.error(e); });
})();
