"""Page-locking host memory in place, and the budget a load measures by doing it.

`pin_in_place` locks an existing buffer with cudaHostRegister (portable), which rounds nothing (torch's
pinned allocator rounds each block up to a power of two). Where the system refuses, the refusal leaves CUDA's
last-error state set, and torch would raise it at the next kernel launch check: `clear_cuda_error` reads
it back (cudaGetLastError), so a refused pin poisons nothing.

`PinBudget` is the one counter every lock of a load goes through (the staging ring's slots first, then the
host store's layers): it stops at the first refusal (Windows makes later pins fail once one has; asking again
only costs time), and at `limit` bytes (SPECEXEC_PIN_LIMIT_GB). What it locked until the refusal is the pin
budget measured on this machine, in this process, now; the load report says it in words. The limit caps the
store's layers; the ring's few slots are taken beside it (so a limit of 0 stages every streamed layer).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import sys
from collections.abc import Callable
from pathlib import Path

import torch

log = logging.getLogger(__name__)

# cudaHostRegisterPortable: the locked memory counts as pinned for every CUDA context of the process, not
# only the current device's (torch's own registration helper passes it too).
HOST_REGISTER_PORTABLE = 1

Locker = Callable[[torch.Tensor], bool]


def pin_in_place(buffer: torch.Tensor) -> bool:
    """Page-lock an existing CPU tensor's memory with cudaHostRegister (portable). Returns False on failure,
    with CUDA's error state cleared: copies then still work, but as slower pageable copies."""
    if not torch.cuda.is_available():
        return False
    try:
        cudart = torch.cuda.cudart()
        status = int(
            cudart.cudaHostRegister(buffer.data_ptr(), buffer.numel() * buffer.element_size(), HOST_REGISTER_PORTABLE)
        )
    except (RuntimeError, AttributeError, AssertionError) as error:  # no cudart bindings in this build
        log.warning("could not page-lock host memory (%s)", error)
        return False
    if status != 0:
        clear_cuda_error()
    return status == 0


def unpin(pointer: int) -> None:
    """Unregister a buffer `pin_in_place` locked (before its memory goes)."""
    with contextlib.suppress(Exception):  # interpreter shutdown: nothing left to protect
        torch.cuda.cudart().cudaHostUnregister(pointer)


def clear_cuda_error() -> None:
    """Read back (and so reset) CUDA's last error after a refused cudaHostRegister: torch's bindings do not
    offer cudaGetLastError, so it is called in the CUDA runtime library torch loaded."""
    library = _cudart_library()
    if library is not None:
        library.cudaGetLastError()


def _cudart_library() -> ctypes.CDLL | None:
    """The CUDA runtime torch uses: already loaded in this process, found by its file name."""
    for path in _loaded_cudart_paths():
        try:
            return ctypes.CDLL(str(path))
        except OSError:
            continue
    log.warning("could not find the CUDA runtime to clear a refused page-lock's error")
    return None


def _loaded_cudart_paths() -> list[Path]:
    if sys.platform == "win32":
        folder = Path(torch.__file__).parent / "lib"
        return sorted(folder.glob("cudart64_*.dll"))
    try:
        maps = Path("/proc/self/maps").read_text(errors="replace")
    except OSError:
        return []
    return sorted({Path(line.split()[-1]) for line in maps.splitlines() if "libcudart" in line})


class PinBudget:
    """Locks buffers through `locker` until the system refuses once, or `limit` bytes are locked.

    locked_bytes: locked so far (store_bytes of it count against `limit`). refused: the system said no (then `locked_bytes` is the measured budget).
    limited: a buffer was turned away by `limit`. Tests pass a `locker` that refuses past a size, as Windows does.
    """

    def __init__(self, limit: int | None = None, locker: Locker = pin_in_place) -> None:
        self.limit = limit
        self.locker = locker
        self.locked_bytes = 0
        self.store_bytes = 0  # of locked_bytes, what counts against `limit`
        self.refused = False
        self.limited = False

    def lock(self, buffer: torch.Tensor, within_limit: bool = True) -> bool:
        """Lock `buffer` if the budget allows; False (and nothing asked of the system) once it does not.
        within_limit=False: the staging ring's slots, taken outside `limit` (a limit caps the store's layers,
        so that a limit of 0 stages every streamed layer), but never past a refusal."""
        nbytes = buffer.numel() * buffer.element_size()
        if self.refused:
            return False
        if within_limit and self.limit is not None and self.store_bytes + nbytes > self.limit:
            self.limited = True
            return False
        if not self.locker(buffer):
            self.refused = True
            log.warning(
                "the system refused to page-lock more than %.2f GiB of host memory", self.locked_bytes / 1024**3
            )
            return False
        self.locked_bytes += nbytes
        self.store_bytes += nbytes if within_limit else 0
        return True

    def give_back(self, nbytes: int) -> None:
        """Count `nbytes` unlocked again (a ring that was not needed)."""
        self.locked_bytes -= nbytes


def lock_on_cpu(buffer: torch.Tensor) -> bool:
    """The locker of a CPU run that streams as on a GPU (tests): host memory needs no lock for a memcpy, so
    every lock succeeds and only a limit decides which layers stage through the ring, as on a GPU."""
    return True
