"""Whole chunks of a local Zarr v3 array decoded straight into the array returned.

zarr-python 3 decodes a chunk into a buffer of its own, then copies it into
the array it returns (zarr-developers/zarr-python#2904): a compressed chunk
peaks at about three times its size while it is read (the compressed bytes,
the decoded chunk, the copy), and the copy is one more pass over the data.
For the layout zarr writes by default -- a local store, a regular chunk grid,
no sharding, the ``bytes`` codec in this machine's byte order, then ``zstd``
or nothing -- :class:`DirectChunks` reads a whole chunk's file and has
numcodecs' zstd (the library zarr's own codec calls) decode it into the array
it returns. Any other array, any other selection, and any chunk that is not
exactly what the metadata says (a missing file is the fill value, as in
zarr) is read by zarr itself, so errors and results are zarr's.
"""

import os
import sys
from typing import Any

import numpy as np

__all__ = ["DirectChunks", "direct_reader"]

_ZSTD_MAGIC = 0xFD2FB528


class DirectChunks:
    """A Zarr array whose whole-chunk reads skip zarr's copy (see the module's notes).

    It has the array's ``shape``, ``dtype``, ``ndim`` and ``chunks``, and
    ``self[key]`` returns what ``array[key]`` returns.
    """

    def __init__(self, array: Any, layout: "_Layout") -> None:
        self.array = array
        self.shape, self.dtype, self.ndim = array.shape, np.dtype(array.dtype), array.ndim
        self.chunks = array.chunks
        self._layout = layout

    #: Reads of one whole chunk each are this reader's fast path (a read of several chunks
    #: is zarr's): a caller free to choose reads chunk by chunk.
    whole_chunks = True

    def __getitem__(self, key: Any) -> Any:
        out = self._layout.read(key)
        return self.array[key] if out is None else out

    def __repr__(self) -> str:
        return f"DirectChunks({self.array!r})"

    def __dask_tokenize__(self) -> Any:
        from dask.base import tokenize

        return ("streamproj-direct", tokenize(self.array))


def direct_reader(array: Any) -> Any:
    """``array`` wrapped in :class:`DirectChunks` where its layout allows, else ``array`` itself."""
    layout = _Layout.of(array)
    return array if layout is None else DirectChunks(array, layout)


class _Layout:
    """Where a Zarr v3 array's chunks lie on disk and how each is decoded."""

    def __init__(self, root, metadata, dtype, chunk_shape, zstd):
        self.root = root
        self.metadata = metadata
        self.dtype = dtype
        self.chunk_shape = tuple(int(c) for c in chunk_shape)
        self.shape = tuple(int(s) for s in metadata.shape)
        self.nbytes = int(np.prod(self.chunk_shape, dtype=np.int64)) * dtype.itemsize
        self.zstd = zstd

    @classmethod
    def of(cls, array):
        """The layout of ``array``, or None where zarr must read it."""
        try:
            import zarr
            from zarr.codecs import BytesCodec, ZstdCodec
            from zarr.core.chunk_grids import RegularChunkGrid
            from zarr.core.metadata import ArrayV3Metadata
            from zarr.storage import LocalStore
        except ImportError:  # (another zarr: read by it)
            return None
        if not isinstance(array, zarr.Array):
            return None
        meta = array.metadata
        store = array.store_path.store
        # (exactly LocalStore: a subclass may keep its chunks elsewhere)
        if not isinstance(meta, ArrayV3Metadata) or type(store) is not LocalStore:
            return None
        if getattr(meta, "storage_transformers", ()) or not isinstance(meta.chunk_grid,
                                                                        RegularChunkGrid):
            return None
        dtype = np.dtype(array.dtype)
        codecs = tuple(meta.codecs)
        if dtype.kind not in "biufc" or not codecs or type(codecs[0]) is not BytesCodec:
            return None
        endian = codecs[0].endian
        if dtype.itemsize > 1 and getattr(endian, "value", None) != sys.byteorder:
            return None
        if len(codecs) == 1:
            zstd = False
        elif len(codecs) == 2 and type(codecs[1]) is ZstdCodec:
            zstd = True
        else:
            return None
        root = os.path.join(str(store.root), *str(array.store_path.path).split("/"))
        return cls(root, meta, dtype, meta.chunk_grid.chunk_shape, zstd)

    def _chunk_of(self, key):
        """The chunk ``key`` selects whole (its grid coordinates), or None."""
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) != len(self.shape):
            return None
        coords = []
        for sel, size, chunk in zip(key, self.shape, self.chunk_shape, strict=True):
            if not isinstance(sel, slice) or sel.step not in (None, 1):
                return None
            start, stop = (0 if sel.start is None else sel.start,
                           size if sel.stop is None else sel.stop)
            if not (isinstance(start, int | np.integer) and isinstance(stop, int | np.integer)):
                return None
            if start < 0 or start % chunk or stop != min(start + chunk, size) or stop <= start:
                return None
            coords.append(int(start) // chunk)
        return tuple(coords)

    def read(self, key):
        """The whole chunk ``key`` selects, decoded into a new array; None where zarr must read it."""
        coords = self._chunk_of(key)
        if coords is None:
            return None
        name = os.path.join(self.root, *self.metadata.encode_chunk_key(coords).split("/"))
        out = np.empty(self.chunk_shape, dtype=self.dtype)  # zarr stores edge chunks whole
        try:
            with open(name, "rb", buffering=0) as f:
                if not self._decode_into(f, out):
                    return None
        except FileNotFoundError:
            return None  # (an unwritten chunk: zarr gives its fill value)
        except (OSError, ValueError, RuntimeError):
            return None  # (unreadable or damaged: zarr reads it again and says so)
        edge = tuple(slice(0, min(c, s - i * c))
                     for i, c, s in zip(coords, self.chunk_shape, self.shape, strict=True))
        return out[edge]

    def _decode_into(self, f, out):
        view = out.reshape(-1).view(np.uint8)  # (memoryview knows no complex or float16 format)
        if not self.zstd:
            if os.fstat(f.fileno()).st_size != self.nbytes:
                return False
            return f.readinto(view) == self.nbytes
        raw = f.read()
        if _zstd_content_size(raw) != self.nbytes:
            return False  # (several frames, or no size written: zarr knows what to do)
        from numcodecs.zstd import Zstd

        Zstd().decode(raw, out=view)
        return True


def _zstd_content_size(raw):
    """The decompressed size a zstd frame's header states, or None (RFC 8878, 3.1.1.1)."""
    if len(raw) < 6 or int.from_bytes(raw[:4], "little") != _ZSTD_MAGIC:
        return None
    descriptor = raw[4]
    fcs_flag, single = descriptor >> 6, (descriptor >> 5) & 1
    dict_bytes = (0, 1, 2, 4)[descriptor & 3]
    fcs_bytes = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if fcs_bytes == 0:
        return None
    at = 5 + (0 if single else 1) + dict_bytes
    if len(raw) < at + fcs_bytes:
        return None
    size = int.from_bytes(raw[at : at + fcs_bytes], "little")
    return size + 256 if fcs_bytes == 2 else size
