"""PyInstaller runtime hook of the CUDA bundle: Triton's C helper module comes from the bundle, prebuilt.

Triton compiles a small C module (`cuda_utils`, from triton/backends/nvidia/driver.c) the first time a kernel
runs, with the machine's C compiler and Python's headers. A desktop has no compiler, and a frozen app's
Python headers exist nowhere, so installer/triton_prebuild.py compiles it at build time into
`triton-prebuilt/` (with the SHA-256 of the source it was built from). This hook makes Triton take it: when
`triton.knobs` is first imported (never before: the app's window process does not import Triton at all), it
sets `knobs.build.impl`, Triton's own switch for how C modules are built, to a function that hands back the
prebuilt file when the source matches, and otherwise builds as Triton would.
"""

import hashlib
import importlib.abc
import importlib.util
import shutil
import sys
import sysconfig
from pathlib import Path

PREBUILT = Path(getattr(sys, "_MEIPASS", "")) / "triton-prebuilt"


def prebuilt_build(name, src, srcdir, library_dirs, include_dirs, libraries):
    """Triton's BuildImpl: the prebuilt `name` module when its recorded source hash matches `src`'s."""
    module = PREBUILT / f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}"
    recorded = PREBUILT / f"{name}.c.sha256"
    if module.is_file() and recorded.is_file():
        # read as text: Triton writes the source in text mode, so on Windows its lines end in CRLF on disk
        if (
            hashlib.sha256(Path(src).read_text(encoding="utf-8").encode("utf-8")).hexdigest()
            == recorded.read_text().strip()
        ):
            target = Path(srcdir) / module.name
            shutil.copyfile(module, target)  # Triton reads it from there into its cache
            return str(target)
    from triton import knobs
    from triton.runtime import build

    knobs.build.impl = None  # Triton's own compiler call, this once
    try:
        return build._build(name, src, srcdir, library_dirs, include_dirs, libraries, [])
    finally:
        knobs.build.impl = prebuilt_build


class _SetBuildImpl(importlib.abc.Loader):
    """Loads triton.knobs with the real loader, then sets its build switch."""

    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        module.build.impl = prebuilt_build


class _TritonKnobsFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != "triton.knobs":
            return None
        sys.meta_path.remove(self)  # once; and find the real spec without finding ourselves
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _SetBuildImpl(spec.loader)
        return spec


if getattr(sys, "frozen", False) and PREBUILT.is_dir():
    sys.meta_path.insert(0, _TritonKnobsFinder())
