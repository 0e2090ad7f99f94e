"""How many CPU threads the engine's torch uses: one helper for the CLI, the engine process and the app.

torch's own default is one thread per core, which leaves nothing for the UI, the terminal or anything else
on the machine; on a busy 2-core machine it made generation several times slower (OpenMP threads waiting
on each other). The default here is the physical cores minus one, at least one.
"""

from __future__ import annotations

import os


def physical_core_count() -> int | None:
    """Physical cores (psutil), else logical cores, else None when neither is known."""
    try:
        import psutil

        count = psutil.cpu_count(logical=False)
    except ImportError:  # psutil is a dependency; this only guards a broken install
        count = None
    return count or os.cpu_count()


def default_thread_count(physical_cores: int | None = None) -> int:
    """Physical cores minus one, at least one (`physical_cores`: given by tests; None = this machine)."""
    cores = physical_cores if physical_cores is not None else physical_core_count()
    return max(1, (cores or 2) - 1)


def resolve_thread_count(requested: int | None) -> int:
    """`requested` when given (>= 1), at most this machine's logical cores (more only make OpenMP's threads wait
    on each other, and a hundred thousand from a typo or a damaged settings file crashed the process starting
    them); else the default."""
    if not requested:
        return default_thread_count()
    return min(requested, os.cpu_count() or requested)


def apply_torch_threads(requested: int | None) -> int:
    """Set torch's intra-op threads to `requested` or the default; returns the count used."""
    import torch

    count = resolve_thread_count(requested)
    torch.set_num_threads(count)
    return count
