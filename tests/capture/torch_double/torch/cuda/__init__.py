"""Test double of torch.cuda (see ../../README.md)."""
import ctypes as _ctypes
import os as _os

from . import _alloc
from . import memory  # noqa: F401

_allocator = _alloc.Allocator(int(_os.environ.get("TORCH_DOUBLE_CAPACITY", 1 << 30)))
_initialized = False


def is_available():
    from .. import version
    return version.cuda is not None


def is_initialized():
    return _initialized


def _lazy_init():
    """The double's cuInit: loads the CUDA injection library like the CUDA driver does."""
    global _initialized
    if _initialized:
        return
    if not is_available():
        raise AssertionError("Torch not compiled with CUDA enabled")
    _initialized = True
    inject = _os.environ.get("CUDA_INJECTION64_PATH")
    if inject:
        lib = _ctypes.CDLL(inject)
        lib.InitializeInjection()


def device_count():
    return 1 if is_available() else 0


def current_device():
    return 0


def empty_cache():
    _allocator.empty_cache()


def memory_stats(device=None):
    return _allocator.stats()


def memory_allocated(device=None):
    return _allocator.allocated_bytes()


def memory_reserved(device=None):
    return _allocator.reserved_bytes()
