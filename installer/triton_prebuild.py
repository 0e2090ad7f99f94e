"""Compile Triton's CUDA helper module (`cuda_utils`, from triton/backends/nvidia/driver.c) at build time, for
the CUDA bundle.

Triton compiles this C module the first time a kernel runs, with the machine's C compiler and Python's
headers. A person's desktop has neither (and a frozen app's Python headers do not exist anywhere), so without
this the fused GPTQ kernel could never start there. This script writes OUT/cuda_utils<EXT_SUFFIX> and
OUT/cuda_utils.c.sha256 (the source it was built from); the bundle's runtime hook
(installer/rthook_triton_build.py) hands that file to Triton instead of compiling. The module links against libcuda.so.1, which only a machine with the NVIDIA driver
has: it is linked here against an empty stand-in with that name (with --no-as-needed, so the linker keeps the
dependency although the stand-in defines nothing), and the driver's real library resolves its symbols at load
time, as with CUDA's own stub libraries.

On Windows (triton-windows) the module links against the import library `cuda.lib` that the wheel ships
for the driver's nvcuda.dll, so no stand-in is needed, and Triton's bundled TinyCC compiles it with the build
machine's Python headers; loading it needs nvcuda.dll, which a build machine without the driver lacks.

    python installer/triton_prebuild.py OUT_FOLDER      (in the CUDA build environment)
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

MODULE = "cuda_utils"


def prebuild(out: Path) -> Path:
    """Write OUT/cuda_utils<EXT_SUFFIX> and its source's SHA-256; returns the module."""
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "cache"
    os.environ["TRITON_CACHE_DIR"] = str(cache.resolve())  # read by triton.knobs when the cache is first used
    from triton.backends.nvidia import driver
    from triton.runtime.build import compile_module_from_src

    source = Path(driver.dirname, "driver.c").read_text()
    if sys.platform == "win32":
        try:
            compile_module_from_src(
                src=source,
                name=MODULE,
                library_dirs=[driver.libdevice_dir],
                include_dirs=driver.include_dirs,
                libraries=driver.libraries,
            )
        except ImportError as error:  # loading it needs nvcuda.dll (the NVIDIA driver), which this machine lacks
            if "DLL load failed" not in str(error):
                raise
        return _keep(source, cache, out)
    with tempfile.TemporaryDirectory() as stub_dir:
        empty = Path(stub_dir) / "empty.c"
        empty.write_text("/* stands in for the NVIDIA driver's libcuda.so.1 at link time */\n")
        subprocess.check_call(
            [
                "gcc",
                "-shared",
                "-fPIC",
                "-Wl,-soname,libcuda.so.1",
                "-o",
                str(Path(stub_dir) / "libcuda.so.1"),
                str(empty),
            ]
        )
        compiler = Path(stub_dir) / "cc"  # Triton runs $CC as one program: the flag goes in a wrapper
        compiler.write_text('#!/bin/sh\nexec gcc -Wl,--no-as-needed "$@"\n')
        compiler.chmod(0o755)
        os.environ["CC"] = str(compiler)
        try:
            compile_module_from_src(
                src=source,
                name=MODULE,
                library_dirs=[driver.libdevice_dir, stub_dir],
                include_dirs=driver.include_dirs,
                libraries=driver.libraries,
            )
        except ImportError as error:  # loading it needs the real libcuda.so.1, which this machine lacks
            if "libcuda.so.1" not in str(error):
                raise
        finally:
            del os.environ["CC"]
    return _keep(source, cache, out)


def _keep(source: str, cache: Path, out: Path) -> Path:
    """Copy the one module Triton built into its cache to OUT with its source's SHA-256; drop the cache."""
    name = f"{MODULE}{sysconfig.get_config_var('EXT_SUFFIX')}"
    built = sorted(cache.glob(f"*/{name}"))
    if len(built) != 1:
        raise SystemExit(f"triton_prebuild: expected one {name} under {cache}, found {built}")
    shutil.copyfile(built[0], out / name)
    (out / f"{MODULE}.c.sha256").write_text(hashlib.sha256(source.encode("utf-8")).hexdigest() + "\n")
    shutil.rmtree(cache)
    return out / name


if __name__ == "__main__":
    print(prebuild(Path(sys.argv[1])))
