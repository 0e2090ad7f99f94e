"""Will the offloaded weights fit in host RAM? Pure arithmetic plus one psutil call, no torch.

The loader checks this before it allocates anything (so a model that cannot fit fails in a second instead
of swapping), and the fit prediction (`core.models.fit`, in the app's torch-free process) asks the same
question of the same functions with the numbers of a machine description.
"""

from __future__ import annotations

from core.errors import InsufficientHostMemoryError
from core.planning.sizes import format_bytes

GIB = 1024**3
# Room left for the OS, the Python process and the largest tensor read while loading.
HOST_MARGIN_BYTES = 1 * GIB


def embedding_in_host_ram(streaming: bool, tied: bool) -> bool:
    """Whether a target keeps its embedding table in host RAM (copying only the looked-up rows to the GPU):
    when it streams, unless the table is tied to the LM head, which runs on the GPU and needs it there."""
    return streaming and not tied


def host_table_bytes(non_layer_bytes: int, embedding_bytes: int, streaming: bool, embedding_on_host: bool) -> int:
    """Non-layer weights held in host RAM: all of them when nothing streams (a CPU run binds every weight in
    place), the embedding table when an offloaded target keeps it there, else none (they live in VRAM)."""
    if not streaming:
        return non_layer_bytes
    return embedding_bytes if embedding_on_host else 0


def host_bytes_needed(store_bytes: int, largest_tensor_bytes: int, table_bytes: int) -> int:
    """Host RAM an offloaded load needs: the store of the layers that stream (resident layers go from the
    checkpoint straight to the GPU and take none; a CPU run stores every layer), the non-layer weights kept
    in host RAM (`table_bytes`: `host_table_bytes`), the largest tensor read whole from the checkpoint, and
    a margin."""
    return store_bytes + table_bytes + largest_tensor_bytes + HOST_MARGIN_BYTES


def check_host_memory(
    needed_bytes: int, available_bytes: int | None = None, what: str = "the offloaded weights"
) -> None:
    """Raise InsufficientHostMemoryError unless `needed_bytes` fit in available RAM (psutil when None)."""
    if available_bytes is None:
        import psutil

        available_bytes = psutil.virtual_memory().available
    if needed_bytes > available_bytes:
        raise InsufficientHostMemoryError(
            f"not enough free RAM for {what}: they need {format_bytes(needed_bytes)} of page-locked host memory "
            f"but only {format_bytes(available_bytes)} is available. Close other programs, use a smaller or more "
            f"strongly quantised model (e.g. GPTQ 4-bit), or add RAM."
        )
