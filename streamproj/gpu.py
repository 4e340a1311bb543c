"""Pass 1's products and the projection on an NVIDIA GPU, through CuPy (optional).

Only the arithmetic that grows with the rows moves: the float64 cast, the shift,
the Gram product ``DᵀD`` and the class sums of a chunk (pass 1), and
``(X - c) @ Vᵀ`` (pass 2). The shifts, the merges, the solvers and every check
stay on the host, in float64, as on the CPU: a chunk's partial summary leaves
the GPU in the layout the CPU's has, so the merges and the ledger are the same.

The GPU sums in cuBLAS's order, not the CPU's blocks, so the same rows give
other last bits: such summaries are pass-1 kernel :data:`KERNEL` in a model's
ledger, and ``update --verify`` sums those rows on a GPU again (cuBLAS repeats
its bits for the same shapes on the same GPU and library; another GPU model or
cuBLAS version may call them changed).

Every function takes its array module from :func:`backend`: CuPy where it
imports and sees a GPU. Tests run the same code with numpy standing in
(:func:`use_backend`), so it is checked where no GPU is.
"""

import contextvars
import threading
from contextlib import contextmanager
from typing import Any

import numpy as np

from .errors import DeviceError, InputError

__all__ = [
    "DEVICES",
    "KERNEL",
    "backend",
    "centred_product",
    "check_device",
    "check_rows",
    "class_moments",
    "class_sums_and_gram",
    "current_device",
    "use_backend",
    "using",
]

DEVICES = ("cpu", "cuda")
# The ledger's number for a summary summed here (stats.PASS1_KERNELS holds it).
KERNEL = 3

# Rows per device block: the float64 block and its one-hot columns stay under this
# (at p = 4,096 that is 8,192 rows; a 10,000-row chunk of 1,000 columns goes whole).
_DEVICE_BLOCK_BYTES = 2**28
# Class sums are one-hot products over this many classes at a time (an n x K one-hot
# matrix for 10,000 classes would be larger than the rows): deterministic, unlike atomics.
_CLASS_BLOCK = 512

_lock = threading.Lock()
_resolved: list[Any] = []  # [module] once looked up, or [None] where there is no GPU
_why: list[str] = []


def _lookup():
    try:
        import cupy
    except ImportError as exc:
        return None, f"CuPy is not installed ({exc}); pip install cupy-cuda12x (or cupy-cuda13x)"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # (CUDA's errors share no importable base)
        return None, f"CuPy sees no GPU ({type(exc).__name__}: {exc})"
    if count < 1:
        return None, "CuPy sees no GPU"
    try:  # a GPU without cuBLAS or a working driver fails here, not inside a task mid-pass
        float((cupy.ones((2, 2)) @ cupy.ones((2, 2))).sum())
    except Exception as exc:
        return None, f"CuPy cannot compute on the GPU ({type(exc).__name__}: {exc})"
    return cupy, ""


def backend():
    """The array module the device functions run on: CuPy, or None where there is no GPU."""
    with _lock:
        if not _resolved:
            module, why = _lookup()
            _resolved.append(module)
            _why.append(why)
        return _resolved[0]


@contextmanager
def use_backend(module):
    """Run the device functions on ``module`` (numpy: the same code without a GPU, for tests)."""
    backend()
    with _lock:
        saved = _resolved[0]
        _resolved[0] = module
    try:
        yield module
    finally:
        with _lock:
            _resolved[0] = saved


def check_device(device, what=None):
    """Raise one clear error unless ``device`` is known and, for ``"cuda"``, there.

    Called before any row is read. ``what``: the asking parameter as the
    message names it (default ``device=…``).
    """
    what = f"device={device!r}" if what is None else what
    if device not in DEVICES:
        msg = f"{what}: expected one of {', '.join(map(repr, DEVICES))}"
        raise DeviceError(msg)
    if device == "cuda" and backend() is None:
        msg = f"{what} needs a GPU that CuPy can use: {_why[0] if _why else 'none found'}"
        raise DeviceError(msg)


_device: contextvars.ContextVar[str] = contextvars.ContextVar("streamproj_device", default="cpu")


def current_device():
    """The device pass 1 and the projection run on where a call names none ("cpu" by default)."""
    return _device.get()


@contextmanager
def using(device):
    """Run pass 1 and the projection on ``device`` ("cpu" or "cuda") within the block.

    Every call that names no device (:func:`~streamproj.accumulate`,
    :class:`~streamproj.BoundaryProjector`'s ``fit``, ``partial_fit`` and
    ``transform``, the jobs) takes this one; ``decision_function``,
    ``predict`` and ``predict_proba`` run on the CPU. A missing GPU is one
    :class:`~streamproj.errors.DeviceError` here, before any row is read. The
    choice is made when a computation is built, so dask's threads and
    distributed workers get it with their tasks. It holds in the calling
    thread (a context variable): threads and processes that the caller starts
    itself, such as joblib's for scikit-learn's ``n_jobs``, do not inherit it
    (unlike scikit-learn's ``config_context``), so enter it inside them.

    >>> import streamproj.gpu
    >>> with streamproj.gpu.using("cpu"):
    ...     streamproj.gpu.current_device()
    'cpu'
    """
    check_device(device)
    token = _device.set(device)
    try:
        yield device
    finally:
        _device.reset(token)


# Copies are plain ``cupy.asarray`` / ``get`` from pageable memory: staging them through
# per-thread page-locked buffers on per-thread streams measured no faster on an H100
# (pass 1 at 300k x 1,000 float32: 0.50 s against 0.48; the projection 0.70 against 0.75).


def check_rows(dtype, name="X"):
    """Raise :class:`~streamproj.errors.InputError` unless rows of ``dtype`` can go to the GPU.

    CuPy has no extended-precision floats (numpy's ``longdouble``), which the
    CPU path takes; called before any row is read.
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "f" and dtype.itemsize > 8:
        msg = (f"{name} holds {dtype} values, which a GPU cannot take: cast them to float64, "
               "or run on the CPU (device='cpu')")
        raise InputError(msg)


def _to_device(xp, rows):
    check_rows(rows.dtype)
    # CuPy copies the raw bytes of a non-native byte order (a Zarr v2 '>f4' array) without
    # swapping them: silently wrong numbers. Swap on the host first.
    native = rows.dtype.newbyteorder("=")
    return xp.asarray(np.ascontiguousarray(rows, dtype=native))


def _is_device_error(exc):
    return type(exc).__module__.split(".")[0] in ("cupy", "cupy_backends", "cupyx")


@contextmanager
def _device_errors():
    """CuPy's and CUDA's failures (out of memory, a lost device) as one clear DeviceError."""
    try:
        yield
    except Exception as exc:
        if not _is_device_error(exc):
            raise
        msg = f"the GPU failed: {type(exc).__name__}: {exc}"
        if "OutOfMemory" in type(exc).__name__:
            msg += "; give it fewer rows per chunk (--chunk-rows), or run on the CPU (--device cpu)"
        raise DeviceError(msg) from exc


def _to_host(xp, array, out=None):
    if xp is np:
        if out is None:
            return array
        if out.shape != array.shape:  # CuPy's get(out=) refuses what numpy would broadcast
            msg = f"device result of shape {array.shape} into a host buffer of shape {out.shape}"
            raise ValueError(msg)
        out[...] = array
        return out
    return array.get(out=out) if out is not None else array.get()


def _decoded(xp, raw, bfloat16):
    """Stored rows as float64 on the device (bfloat16 bit patterns decoded exactly)."""
    if bfloat16:
        raw = (raw.astype(xp.uint32) << 16).view(xp.float32)
    return raw.astype(xp.float64)


def _block_rows(n, width):
    return max(1, min(n, _DEVICE_BLOCK_BYTES // (8 * max(1, width))))


def class_sums_and_gram(X, inverse, counts, shifts, shared, bfloat16=False, blocks=None,
                        out=None):
    """One chunk's class sums and exact pooled scatter, summed on the device.

    Parameters
    ----------
    X : ndarray of shape (n, p)
        The chunk's rows as stored (any real dtype; uint16 bit patterns with ``bfloat16``).
    inverse : ndarray of shape (n,)
        Each row's class index in ``[0, K)``.
    counts : ndarray of shape (K,)
        Rows per class (all > 0).
    shifts : ndarray of shape (K, p)
        A point near each class's mean; row i is shifted by ``shifts[inverse[i]]``
        (by ``shifts[0]`` alone where ``shared``), as on the CPU.
    shared : bool
        One shift for every row.
    bfloat16 : bool
        X holds bfloat16 bit patterns as uint16.
    blocks : list of (j0, j1, offset), optional
        Where the upper triangle goes in ``out``: rows ``[0, j1)`` of columns
        ``[j0, j1)``, Fortran-ordered from ``offset`` (stats' column panels).
        None: ``out`` is the whole p×p matrix, Fortran-ordered.
    out : ndarray of float64, optional
        The host buffer for the scatter (allocated when None and ``blocks`` is None).

    Returns
    -------
    sums : ndarray of shape (K, p)
        Per-class sums of the shifted rows (host).
    scatter : ndarray
        ``out``: at least the upper triangle of ``Σ_k Σ_i (x_i - m_k)(x_i - m_k)ᵀ``
        about each class's exact mean (``m_k = shift_k + sums_k / n_k``).
    """
    xp = backend()
    if xp is None:
        check_device("cuda")
    with _device_errors():
        return _class_sums_and_gram(xp, X, inverse, counts, shifts, shared, bfloat16, blocks, out)


def _class_sums_and_gram(xp, X, inverse, counts, shifts, shared, bfloat16, blocks, out):
    n, p = X.shape
    K = counts.shape[0]
    inverse_d = xp.asarray(inverse)
    shifts_d = xp.asarray(np.ascontiguousarray(shifts[:1] if shared else shifts, dtype=np.float64))
    gram = xp.zeros((p, p))
    sums = xp.zeros((K, p))
    rows = _block_rows(n, p + min(K, _CLASS_BLOCK))
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        block = _decoded(xp, _to_device(xp, X[start:stop]), bfloat16)
        labels = inverse_d[start:stop]
        block -= shifts_d[0] if shared else shifts_d[labels]
        gram += block.T @ block
        for c0 in range(0, K, _CLASS_BLOCK):
            c1 = min(c0 + _CLASS_BLOCK, K)
            onehot = (labels[:, None] == xp.arange(c0, c1)[None, :]).astype(xp.float64)
            sums[c0:c1] += onehot.T @ block
    # the rank-K correction moves each class from its shift onto its exact mean
    gram -= (sums.T / xp.asarray(counts, dtype=xp.float64)) @ sums
    if blocks is None:
        if out is None:
            out = np.empty((p, p), order="F")
        _to_host(xp, xp.asfortranarray(gram), out)
    else:
        packed = xp.empty(out.shape[0])
        for j0, j1, offset in blocks:
            packed[offset:offset + j1 * (j1 - j0)] = gram[:j1, j0:j1].ravel(order="F")
        _to_host(xp, packed, out)
    return _to_host(xp, sums), out


def centred_product(block, center, matrix, bfloat16=False):
    """``(block - center) @ matrixᵀ`` in float64, on the device; the result on the host.

    Parameters
    ----------
    block : ndarray of shape (n, p)
        Rows as stored (uint16 bit patterns with ``bfloat16``).
    center : ndarray of shape (p,)
    matrix : ndarray of shape (d, p)
    """
    xp = backend()
    if xp is None:
        check_device("cuda")
    with _device_errors():
        return _centred_product(xp, block, center, matrix, bfloat16)


def _centred_product(xp, block, center, matrix, bfloat16):
    n, p = block.shape
    center_d = xp.asarray(np.asarray(center, dtype=np.float64))
    matrix_d = xp.asarray(np.ascontiguousarray(np.asarray(matrix, dtype=np.float64).T))
    out = np.empty((n, matrix.shape[0]))
    rows = _block_rows(n, p)
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        rows_d = _decoded(xp, _to_device(xp, block[start:stop]), bfloat16)
        rows_d -= center_d
        _to_host(xp, rows_d @ matrix_d, out[start:stop])
    return out


def class_moments(X, order, counts, fourth, bfloat16=False):
    """Each class's mean and scatter about it (and the co-moments), summed on the device.

    The same steps as the CPU's per-class moments in :mod:`streamproj.stats`:
    the class's rows (``X[order]``, grouped by class, ``counts[k]`` each) are
    centred on their float64 mean, and the rounding left in that mean is
    removed exactly from the scatter.

    Returns
    -------
    means, residuals : ndarray of shape (K, p)
        The mean and what rounding left in it (``mean + residual`` is exact to
        twice the precision).
    m2 : ndarray of shape (K, p, p)
    m21, m22 : ndarray of shape (K, p, p), or None without ``fourth``
        ``Σ d_a² d_b`` and ``Σ d_a² d_b²`` about the exact mean.
    """
    xp = backend()
    if xp is None:
        check_device("cuda")
    with _device_errors():
        return _class_moments(xp, X, order, counts, fourth, bfloat16)


def _class_moments(xp, X, order, counts, fourth, bfloat16):
    p = X.shape[1]
    K = counts.shape[0]
    means = np.empty((K, p))
    residuals = np.empty((K, p))
    m2 = np.empty((K, p, p))
    # co-moments only for "fourth"; empty stand-ins keep one code path below
    m21 = np.empty((K, p, p) if fourth else (0, p, p))
    m22 = np.empty((K, p, p) if fourth else (0, p, p))
    stop = 0
    for k in range(K):
        start, stop = stop, stop + int(counts[k])
        rows = _decoded(xp, _to_device(xp, X[order[start:stop]]), bfloat16)
        mean = rows.mean(axis=0)
        d = rows - mean
        residual = d.sum(axis=0)
        scatter = d.T @ d
        scatter -= xp.outer(residual, residual) / counts[k]
        means[k] = _to_host(xp, mean)
        residuals[k] = _to_host(xp, residual / counts[k])
        _to_host(xp, scatter, m2[k])
        if fourth:
            d -= residual / counts[k]
            d2 = d * d
            _to_host(xp, d2.T @ d, m21[k])
            _to_host(xp, d2.T @ d2, m22[k])
    return means, residuals, m2, m21 if fourth else None, m22 if fourth else None
