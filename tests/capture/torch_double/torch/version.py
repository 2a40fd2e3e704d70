"""Test double (see ../README.md)."""
import os as _os

cuda = None if _os.environ.get("TORCH_DOUBLE_CPU") == "1" else "13.0"
hip = None
