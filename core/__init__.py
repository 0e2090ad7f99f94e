"""SpecExec engine library: sampling, draft tree search, verification, caches, model loading.

Nothing in this package imports Qt; the desktop front end lives in `app/`.
"""

import os

__version__ = "0.1.0"

# CUDA numbers GPUs fastest first unless told otherwise, NVML by PCI bus id: the same order in both lets GPU i
# of the hardware probe (NVML) be cuda:i in the engine. Set before anything starts CUDA (a value the person set
# stays).
os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
