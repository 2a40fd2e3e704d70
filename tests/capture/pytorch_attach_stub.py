"""Loads the agent into this Python process the way `fragscope attach` does through gdb (dlopen,
then InitializeInjection) after importing torch (the double, or Debian's CPU-only torch), and
gives the PyTorch bridge time to look at it. Run under `fragscope record`, which points
CUDA_INJECTION64_PATH at the agent."""
import ctypes
import os
import sys
import time

import torch  # noqa: F401

ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"]).InitializeInjection()
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0.8)
print("attach stub done, torch", torch.__version__)
