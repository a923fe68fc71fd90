"""Audio chunks (~120 KB each, thousands a second) from a heap kept mapped: above glibc's mmap threshold each one
would be a fresh mapping whose pages fault in as the PCM is copied (3-4x the copy itself, measured on the CPU)."""
import ctypes
import ctypes.util

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3


def keep_heap(mmap_from: int = 64 << 20, trim_from: int = 256 << 20) -> bool:
    """Allocations under `mmap_from` from the heap; free heap returned to the system past `trim_from`. False where
    the C library has no mallopt (not glibc)."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, mmap_from)) and bool(mallopt(M_TRIM_THRESHOLD, trim_from))
