"""A TEST DOUBLE of PyTorch's CUDA memory surface for fragscope's tests (see ../README.md).
It is not PyTorch and computes nothing."""
import os as _os

__version__ = _os.environ.get("TORCH_DOUBLE_VERSION", "2.11.0+double")
IS_TORCH_DOUBLE = True

from . import version  # noqa: E402
from . import cuda  # noqa: E402
from . import profiler  # noqa: E402

uint8 = "uint8"


class Tensor:
    def __init__(self, block):
        self._block = block

    def data_ptr(self):
        return self._block.addr

    def nbytes(self):
        return self._block.requested

    def __del__(self):
        b = self._block
        if b is not None:
            self._block = None
            cuda._allocator.free(b)


def empty(n, dtype=uint8, device="cpu"):
    if not str(device).startswith("cuda"):
        raise RuntimeError("the torch double only models CUDA tensors")
    cuda._lazy_init()
    return Tensor(cuda._allocator.malloc(int(n)))
