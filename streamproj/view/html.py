"""One self-contained HTML file from a :class:`~.pyramid.Pyramid`: data embedded, no network.

Each level's per-class counts are packed in the narrowest unsigned integer
type that holds them, deflated (the browser inflates them with its built-in
``DecompressionStream``) and base64-encoded into the page. The size is
bounded by construction: levels are added coarsest first while the encoded
total stays within ``budget`` bytes, and the sample is bounded by its tiling,
so no number of rows makes the file larger than ``budget + SAMPLE_BOUND +
template``.
"""

import base64
import json
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from importlib import resources

import numpy as np

__all__ = ["DEFAULT_BUDGET", "encode_view", "sample_frame"]

DEFAULT_BUDGET = 14 * 2**20  # encoded levels; the sample (up to 5.6 MB) and the page add the rest


def _pack(array):
    """Deflated, base64 bytes of a non-negative integer array in its narrowest dtype.

    Deflated with ``Z_RLE``: counts are mostly runs of zeros, and run-length matches
    alone took 25-40 % less time than level 1's search and came out no larger (the
    benchmark's finest level: 14 against 24 ms, 464 against 502 kB).
    """
    top = int(array.max()) if array.size else 0
    dtype = "<u1" if top < 2**8 else "<u2" if top < 2**16 else "<u4" if top < 2**32 else None
    if dtype is None:  # counts past 2^32 in one cell: JS reads them as float64
        raw, dtype = array.astype("<f8").tobytes(), "<f8"
    else:
        raw = np.ascontiguousarray(array, dtype=dtype).tobytes()
    return _deflate64(raw, zlib.Z_RLE), dtype[1:]


def _box(counts):
    """The smallest block of cells ``[ox, oy, bx, by]`` of ``counts`` (B, gx, gy) holding every row.

    The view's extent is wider than the data (for zooming out), so most
    cells are empty: only the box is packed (the finest level of the
    benchmark's two Gaussian classes is 30 % box), and the page puts it back
    in a grid of zeros.
    """
    filled_x = np.flatnonzero(counts.any(axis=(0, 2)))
    if filled_x.size == 0:
        return [0, 0, 0, 0]
    filled_y = np.flatnonzero(counts[:, filled_x[0] : filled_x[-1] + 1].any(axis=(0, 1)))
    return [int(filled_x[0]), int(filled_y[0]), int(filled_x[-1] - filled_x[0] + 1),
            int(filled_y[-1] - filled_y[0] + 1)]


def _pack_level(counts):
    """``(blob, dtype, box)``: :func:`_pack` of the level's :func:`_box` of cells."""
    ox, oy, bx, by = box = _box(counts)
    return (*_pack(counts[:, ox : ox + bx, oy : oy + by]), box)


def _deflate64(raw, strategy=zlib.Z_DEFAULT_STRATEGY):
    """Deflated (level 1: the fastest, with ``strategy``), base64 text of ``raw`` bytes."""
    packer = zlib.compressobj(1, zlib.DEFLATED, 15, 8, strategy)
    return base64.b64encode(packer.compress(raw) + packer.flush()).decode("ascii")


def _stored(levels, packed, cell, budget, used):
    """The levels (coarsest first) whose packed bytes fit ``budget`` after ``used``, and the bytes used.

    The coarsest level is always stored; ``cell`` is the finest level's.
    """
    out: list[dict] = []
    for depth, (counts, (blob, dtype, box)) in enumerate(zip(levels, packed, strict=True)):
        if used + len(blob) > budget and out:
            break
        used += len(blob)
        _, gx, gy = counts.shape
        cw, ch = (float(c) for c in cell * 2.0 ** (len(levels) - 1 - depth))
        out.append({"gx": gx, "gy": gy, "cw": cw, "ch": ch, "dtype": dtype, "data": blob,
                    "box": box})
    return out, used


def sample_frame(pyramid):
    """``(origin (2,), unit (2,))``: a sampled row's stored ``xy`` is ``(z - origin) / unit``.

    The unit is the finest cell; the origin the extent's centre, or an edge
    (the boundary ``z[0] = 0``) where there is one, so that a row's side of
    it survives the rounding.
    """
    centre = pyramid.extent.mean(axis=1)
    origin = np.array([centre[a] if edge is None else edge
                       for a, edge in enumerate(pyramid.edges)], dtype=np.float64)
    return origin, np.asarray(pyramid.cell, dtype=np.float64)


def encode_view(pyramid, meta, budget=DEFAULT_BUDGET):
    """The page's data: meta (JSON-able) plus encoded levels and sample.

    Returns
    -------
    payload : dict (JSON-able)
    stored_levels : int
    """
    levels = pyramid.levels()
    overview = pyramid.overview_levels()
    s = pyramid.sample
    order = np.argsort(s["row"])  # (a row is sampled once: no ties, stable or not)
    origin, unit = sample_frame(pyramid)
    # float32 of the coordinates themselves kept 11 heights for 3,000 rows at z[1] = 2e7
    # (a hyperplane-centred frame) and overflowed past 3e38: offsets in finest cells instead
    coords = np.column_stack([s["x"][order], s["y"][order]])
    with np.errstate(over="ignore"):
        xy = ((coords - origin) / unit).astype("<f4")
    if not np.isfinite(xy).all():
        # a far row more than 3.4e38 finest cells out (a cloud in tiny units, one row at
        # 1e37): the coordinates themselves, in float64 (bytes=8)
        origin, unit, xy = np.zeros(2), np.ones(2), coords.astype("<f8")
    raw = [xy.tobytes(),
           s["bucket"][order].astype("<u1").tobytes(), s["row"][order].astype("<f8").tobytes()]
    # the coordinates' low bytes are noise: Huffman coding alone took a third of level 1's
    # time and came out no larger; the sorted rows' float64 bytes repeat, level 1 keeps them
    strategies = [zlib.Z_HUFFMAN_ONLY, zlib.Z_RLE, zlib.Z_DEFAULT_STRATEGY]
    # deflate releases the GIL: the levels and the sample are packed side by side
    with ThreadPoolExecutor(min(4, os.cpu_count() or 1)) as pool:
        packed = list(pool.map(_pack_level, levels))
        points_blobs = list(pool.map(_deflate64, raw, strategies))
        packed_overview = list(pool.map(_pack_level, overview))
    # the names of the classes in "other" sampled rows hover under: from the levels' budget
    other = _other_classes(pyramid.classmap, s["bucket"][order], s["cls"][order])
    used = len(json.dumps(other))
    tier = None
    if overview:  # first, coarsest first, in half the budget: it holds every row
        o = pyramid.overview
        stored, used = _stored(overview, packed_overview, o["cell"], budget // 2, used)
        tier = {"lower": o["lower"].tolist(), "levels": stored, "levels_built": len(overview)}
        # where rows beyond the fine grid lie, on the finest overview level stored
        only = pyramid.overview_only()
        f = only.shape[0] // stored[-1]["gx"], only.shape[1] // stored[-1]["gy"]
        only = only.reshape(only.shape[0] // f[0], f[0], only.shape[1] // f[1], f[1]).max(axis=(1, 3))
        tier["only"], _ = _pack(only)
        used += len(tier["only"])
    encoded, _ = _stored(levels, packed, pyramid.cell, budget, used)
    points = {"count": int(order.size), "xy": points_blobs[0], "bytes": xy.itemsize,
              "origin": origin.tolist(), "unit": unit.tolist(), "bucket": points_blobs[1],
              "row": points_blobs[2], "tiles": pyramid.tiles, "per_tile": pyramid.per_tile,
              "far_tiles": pyramid.far_tiles}
    points.update(other)
    payload = dict(meta)
    payload.update({
        "extent": pyramid.extent.tolist(),
        "cell": pyramid.cell.tolist(),
        "levels": encoded,
        "levels_built": len(levels),
        "points": points,
        "outside": pyramid.outside,
        "overview": tier,
    })
    return payload, len(encoded)


def _other_classes(classmap, bucket, cls):
    """The classes of the sampled rows in "other" that the model knows (their hover names them).

    Returns ``{}`` where there are none, else ``classes`` (their names) and
    ``class`` (deflated, base64): per sampled row 0, or 1 + its class's place
    in ``classes``, in the narrowest unsigned dtype (``class_bytes``).
    """
    from ..plot.reading import one_line

    named = (bucket == classmap.n_buckets - 1) & (cls < len(classmap.classes))
    if not named.any():
        return {}
    positions, index = np.unique(cls[named], return_inverse=True)
    which = np.zeros(cls.size, dtype=np.min_scalar_type(positions.size))
    which[named] = index + 1
    return {"classes": [one_line(str(c)) for c in classmap.classes[positions]],
            "class": _deflate64(which.astype(which.dtype.newbyteorder("<")).tobytes()),
            "class_bytes": which.itemsize}


def render_page(payload, title):
    """The HTML page: the template with the payload and the script inlined."""
    pkg = resources.files("streamproj.view")
    template = (pkg / "template.html").read_text(encoding="utf-8")
    script = (pkg / "view.js").read_text(encoding="utf-8")
    # no "<" in the data at all: "</script>" ended it early, and "<!--<script>" (a class name)
    # put the parser in a state where its own "</script>" did not end it (nothing drew)
    data = json.dumps(payload, separators=(",", ":")).replace("<", "\\u003c")
    import html
    import re

    # in one pass over the template: a class named "{{SCRIPT}}" (or a title "{{DATA}}") had the
    # script pasted into the data, and the page did not load
    parts = {"TITLE": html.escape(title), "DATA": data, "SCRIPT": script}
    return re.sub(r"\{\{(TITLE|DATA|SCRIPT)\}\}", lambda m: parts[m.group(1)], template)
