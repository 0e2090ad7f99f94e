"""What a model spec may be, checked without loading anything (no torch): the app's settings dialog uses
it so a path that does not exist is refused where it is typed, not when the engine fails to load it.

A spec is 'builtin' / 'builtin-draft', a model folder, a .gguf file, or a Hugging Face repo id already in the
local cache (core.loading.load resolves it; only its form is checked here).
"""

from __future__ import annotations

import re
from pathlib import Path

BUILTIN = "builtin"
BUILTIN_DRAFT = "builtin-draft"
BUILTIN_NAMES = (BUILTIN, BUILTIN_DRAFT)
REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


def spec_problem(spec: str) -> str | None:
    """Why `spec` cannot be a model, in plain words; None when it may be one."""
    spec = spec.strip()
    if not spec:
        return "no model given"
    if spec in BUILTIN_NAMES:
        return None
    path = Path(spec).expanduser()
    if path.is_dir():
        try:
            if (path / "config.json").is_file() or any(path.glob("*.gguf")):
                return None
        except PermissionError:
            return f"the folder {path} cannot be read: this account has no permission to look inside it"
        return f"the folder {path} holds no model (no config.json and no .gguf file)"
    if path.is_file():
        return None if path.suffix.lower() == ".gguf" else f"{path} is a file but not a .gguf model file"
    looks_like_a_path = spec.startswith(("/", "~", ".", "\\")) or path.suffix.lower() == ".gguf" or ":" in spec[:3]
    if looks_like_a_path or not REPO_ID_RE.match(spec):
        return f"{path} was not found"
    return None  # a repo id: the engine looks it up in the local Hugging Face cache
