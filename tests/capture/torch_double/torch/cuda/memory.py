"""Test double of torch.cuda.memory's history API (see ../../README.md)."""
import sys


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize,
                           device=None, clear_history=False, compile_context=False,
                           global_record_annotations=False, skip_actions=None):
    from . import _allocator
    if isinstance(enabled, bool):
        raise TypeError("the double models the string API of torch >= 2.1 only")
    _allocator.record(enabled, context, int(max_entries))


def _snapshot(device=None):
    from . import _allocator
    return _allocator.snapshot()


def memory_stats(device=None):
    from . import _allocator
    return _allocator.stats()
