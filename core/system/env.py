"""Every SPECEXEC_* environment variable, declared once (as vLLM's envs.py does): its name, and what it does.

Modules read a variable through its name here, so a search for the name finds every place that obeys it.
Nothing here reads the environment at import: each reader decides when (the engine process inherits them).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

# Folders (core.system.locations; the app's log folder in app.system.paths)
DATA_DIR_ENV = "SPECEXEC_DATA_DIR"
"""One folder for everything (portable installs, tests): models/, config/, cache/ go under it."""
MODELS_DIR_ENV = "SPECEXEC_MODELS_DIR"
"""Where models are downloaded and looked for; wins over SPECEXEC_DATA_DIR. The app sets it from its Settings'
models folder (app.system.models_folder), unless it was set before the app started."""
MODELS_DIR_FROM_SETTINGS_ENV = "SPECEXEC_MODELS_DIR_FROM_SETTINGS"
"""1 where the app itself set SPECEXEC_MODELS_DIR from its settings (so a later change of the setting may
replace it, where a folder set from outside the app is kept)."""
CONFIG_DIR_ENV = "SPECEXEC_CONFIG_DIR"
"""The settings folder; wins over SPECEXEC_DATA_DIR."""
CACHE_DIR_ENV = "SPECEXEC_CACHE_DIR"
"""The cache (the converted built-in model, measured speeds, cost models); wins over SPECEXEC_DATA_DIR."""
LOG_DIR_ENV = "SPECEXEC_LOG_DIR"
"""The app's log folder."""

# What the engine runs
CUDA_GRAPHS_ENV = "SPECEXEC_CUDA_GRAPHS"
"""0 turns the draft's CUDA graphs off (capture is on by default on CUDA, never elsewhere)."""
OVERLAP_ENV = "SPECEXEC_OVERLAP"
"""0 turns the draft-while-the-target-streams overlap off (core.decoding.methods.specexec: no shadow search, each
search starts from its root alone), 1 turns it on everywhere (on a CPU it then runs in sequence, for tests and
measurements); unset: on where the draft has a stream of its own (CUDA). The commands' --no-overlap wins."""
ATTENTION_FIX_ENV = "SPECEXEC_ATTENTION_FIX"
"""0 turns off what keeps attention from re-planning (core.modeling.attention.steady_attention): cuDNN attention
stays allowed on CUDA and a target's attention columns are not bucketed. For the GPU check's before/after."""
PIN_LIMIT_ENV = "SPECEXEC_PIN_LIMIT_GB"
"""GB (10^9 bytes) of streamed layers the weight store may page-lock (core.planning.pinning parses it): a cap
like Windows' or WSL2's, imposed on any machine, so the staging ring runs where pinning never fails. The
ring's few pinned slots are taken beside it. Unset: as much as the system allows. 0: every streamed layer
stages through the ring."""

# Inputs that stand in for the real world (tests, fixtures, people who curate their own lists)
HW_FIXTURE_ENV = "SPECEXEC_HW_FIXTURE"
"""A hardware description file used instead of probing this computer (`--hw FILE` wins)."""
CATALOG_ENV = "SPECEXEC_CATALOG"
"""Another catalog file instead of resources/catalog.json."""
FREE_BYTES_OVERRIDE_ENV = "SPECEXEC_DOWNLOAD_FREE_BYTES"
"""The free disk space downloads believe they have (tests of the full-disk path)."""
DRAFT_KERNEL_ENV = "SPECEXEC_DRAFT_KERNEL"
"""A 4-bit draft's kernel, forced (core.planning.draft_kernel's names: tinygemm, fused, dequantise, eager
dequantise) instead of the fastest measured on the card; for comparisons and debugging."""


@contextmanager
def variables_set(values: Mapping[str, str]) -> Iterator[None]:
    """These environment variables set for the `with` block, each put back as it was (or removed) after it:
    for a measurement that runs the same code with a variable on and off in one process."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
