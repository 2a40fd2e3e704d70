"""fragscope_nvtx: mark frames and per-frame quality metrics for fragscope, over NVTX.

fragscope reads NVTX, so a generation script needs no fragscope library: this module only
spells the two conventions (docs/capture.md, docs/user-guide.md):

* a range whose message is ``frame N`` opens frame N and its end closes it;
* a mark ``metric NAME=VALUE [NAME=VALUE ...] [frame=N]`` records per-frame metrics.

Usage::

    from fragscope_nvtx import frame, metric

    for i in range(num_frames):
        with frame(i):
            latents = denoise(latents)          # allocations here belong to frame i
        metric("coherence_score", score(i), frame=i)

It uses ``torch.cuda.nvtx`` when PyTorch is importable, else the NVTX C library
(libnvToolsExt.so.1) through ctypes, else does nothing (so scripts run unchanged without
CUDA). Pure Python, no dependencies; copy it next to your script or put it on PYTHONPATH.
"""

import contextlib
import ctypes
import ctypes.util
import math
import re

__all__ = ["frame", "metric", "mark", "backend"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


class _Null:
    name = "none"

    def push(self, msg):
        pass

    def pop(self):
        pass

    def mark(self, msg):
        pass


class _Torch:
    name = "torch.cuda.nvtx"

    def __init__(self, nvtx):
        self._nvtx = nvtx

    def push(self, msg):
        self._nvtx.range_push(msg)

    def pop(self):
        self._nvtx.range_pop()

    def mark(self, msg):
        self._nvtx.mark(msg)


class _CNvtx:
    name = "libnvToolsExt (ctypes)"

    def __init__(self, lib):
        self._lib = lib
        lib.nvtxRangePushA.argtypes = [ctypes.c_char_p]
        lib.nvtxRangePushA.restype = ctypes.c_int
        lib.nvtxRangePop.argtypes = []
        lib.nvtxRangePop.restype = ctypes.c_int
        lib.nvtxMarkA.argtypes = [ctypes.c_char_p]
        lib.nvtxMarkA.restype = None

    def push(self, msg):
        self._lib.nvtxRangePushA(msg.encode("utf-8"))

    def pop(self):
        self._lib.nvtxRangePop()

    def mark(self, msg):
        self._lib.nvtxMarkA(msg.encode("utf-8"))


def _load():
    try:
        import torch.cuda.nvtx as nvtx  # noqa: PLC0415 (optional dependency)

        return _Torch(nvtx)
    except Exception:  # no torch, or torch without CUDA support
        pass
    for name in ("libnvToolsExt.so.1", "libnvToolsExt.so", ctypes.util.find_library("nvToolsExt")):
        if not name:
            continue
        try:
            return _CNvtx(ctypes.CDLL(name))
        except OSError:
            continue
    return _Null()


_backend = _load()


def backend():
    """Name of the NVTX backend in use: 'torch.cuda.nvtx', 'libnvToolsExt (ctypes)' or 'none'."""
    return _backend.name


def _check_index(i):
    if isinstance(i, bool) or not isinstance(i, int) or i < 0:
        raise ValueError("frame index must be a non-negative int, got %r" % (i,))
    return i


@contextlib.contextmanager
def frame(i):
    """Context manager: everything inside belongs to frame ``i`` (an NVTX range 'frame i')."""
    _backend.push("frame %d" % _check_index(i))
    try:
        yield
    finally:
        _backend.pop()


def metric(name, value, frame=None, **more):
    """Record metric ``name`` = ``value`` (and any ``more`` NAME=VALUE pairs) for ``frame``
    (the current frame when None)."""
    pairs = [(name, value)] + sorted(more.items())
    parts = []
    for n, v in pairs:
        if not isinstance(n, str) or not _NAME.match(n) or n == "frame":
            raise ValueError("metric name must be an identifier other than 'frame', got %r" % (n,))
        v = float(v)
        if math.isnan(v) or math.isinf(v):
            raise ValueError("metric %s must be finite, got %r" % (n, v))
        parts.append("%s=%s" % (n, repr(v)))
    msg = "metric " + " ".join(parts)
    if frame is not None:
        msg += " frame=%d" % _check_index(frame)
    _backend.mark(msg)
    return msg


def mark(message):
    """A plain NVTX mark (shown on the timeline; precursor lists include it)."""
    _backend.mark(str(message))


if __name__ == "__main__":
    # Self-check without CUDA: messages follow fragscope's conventions.
    assert metric("coherence_score", 0.124, frame=16) == "metric coherence_score=0.124 frame=16"
    assert metric("a", 1, b=2) == "metric a=1.0 b=2.0"
    with frame(3):
        pass
    print("fragscope_nvtx OK, backend:", backend())
