"""Will the offloaded weights fit in host RAM? Pure arithmetic plus one psutil call, no torch.

The loader checks this before it allocates anything (so a model that cannot fit fails in a second instead
of swapping), and the fit prediction (`core.models.fit`, in the app's torch-free process) asks the same
question of the same functions with the numbers of a machine description.
"""

from __future__ import annotations

from core.errors import InsufficientHostMemoryError

GIB = 1024**3
# Room left for the OS, the Python process and the largest tensor read while loading.
HOST_MARGIN_BYTES = 1 * GIB


def host_bytes_needed(store_bytes: int, largest_tensor_bytes: int, non_layer_bytes: int, on_cpu: bool) -> int:
    """Host RAM an offloaded load needs: the one layer store, the largest tensor read whole from the
    checkpoint, a margin, and the non-layer weights when the model runs on the CPU (on a GPU they live in VRAM)."""
    return store_bytes + largest_tensor_bytes + HOST_MARGIN_BYTES + (non_layer_bytes if on_cpu else 0)


def check_host_memory(needed_bytes: int, available_bytes: int | None = None, what: str = "the offloaded weights") -> None:
    """Raise InsufficientHostMemoryError unless `needed_bytes` fit in available RAM (psutil when None)."""
    if available_bytes is None:
        import psutil

        available_bytes = psutil.virtual_memory().available
    if needed_bytes > available_bytes:
        raise InsufficientHostMemoryError(
            f"not enough free RAM for {what}: they need {needed_bytes / GIB:.1f} GiB of page-locked host memory "
            f"but only {available_bytes / GIB:.1f} GiB is available. Close other programs, use a smaller or more "
            f"strongly quantised model (e.g. GPTQ 4-bit), or add RAM."
        )
