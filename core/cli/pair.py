"""Loading the target/draft pair a command names (--target, --draft and the model flags)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from core.cli.options import offload_settings, planned_memory

if TYPE_CHECKING:
    from core.loading.load import LoadedModel


def load_pair(args: argparse.Namespace, need_draft: bool = True) -> tuple[LoadedModel, LoadedModel | None]:
    """Load --draft (when the method needs one) and --target as core.loading.pair does; each loading step is
    said on standard error unless the command prints --json."""
    from core.loading.pair import load_pair as load_model_pair

    say = None if getattr(args, "json", False) else (lambda message: print(message, file=sys.stderr))
    return load_model_pair(
        args.target,
        args.draft if need_draft else None,
        offload=offload_settings(args),
        dtype=args.dtype,
        device=args.device,
        progress_for=lambda role, spec: (say, None),
        **planned_memory(args),
    )
