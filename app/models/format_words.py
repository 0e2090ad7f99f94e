"""How a model's weights are stored, in the words its card shows ("4-bit GPTQ", "4-bit AWQ", "16-bit",
"GGUF Q4_K_M"): the one fact that says how much memory a model needs and how it was made, read from the
catalog for its pairs and from the folder's settings (no weights read) for an imported model."""

from __future__ import annotations

from pathlib import Path

from core.errors import SpecExecError

METHOD_NAMES = {"gptq": "GPTQ", "awq": "AWQ", "compressed-tensors": "compressed-tensors", "rtn": "RTN"}
FLOAT_BITS = {"bf16": 16, "fp16": 16, "float16": 16, "bfloat16": 16, "float32": 32, "fp32": 32}


def catalog_format(quantization: str) -> str:
    """A catalog model's `quantization` ("gptq-4bit-128g-actorder", "awq-4bit-128g", "bf16") in words."""
    if quantization in FLOAT_BITS:
        return f"{FLOAT_BITS[quantization]}-bit"
    method, _, rest = quantization.partition("-")
    bits = rest.split("-")[0].removesuffix("bit")
    name = METHOD_NAMES.get(method, method.upper())
    return f"{bits}-bit {name}" if bits.isdigit() else name


def folder_format(path: Path) -> str:
    """An imported model's format: a .gguf file's type, else the folder's 4-bit scheme or 16-bit; "" when the
    settings cannot be read (the card then shows no format rather than a guess)."""
    from core.modeling.model_format import quant_scheme

    ggufs = [path] if path.suffix == ".gguf" else sorted(path.glob("*.gguf")) if path.is_dir() else []
    if ggufs:
        return "GGUF"
    try:
        scheme = quant_scheme(path)
    except (SpecExecError, OSError, ValueError):
        return ""
    if scheme is None:
        return "16-bit"
    return f"{scheme.bits}-bit {METHOD_NAMES.get(scheme.method, scheme.method)}"
