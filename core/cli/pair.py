"""Loading the target/draft pair for a command, with the tokenizer check."""

from __future__ import annotations

import argparse
import sys

from core.cli.options import offload_settings, planned_memory
from core.loading.load import LoadedModel, check_model_exists, check_same_tokenizer, load_model


def load_pair(args: argparse.Namespace, need_draft: bool = True) -> tuple[LoadedModel, LoadedModel | None]:
    """Load --draft (when the method needs one) and then --target; refuse pairs whose tokenizers differ.

    The draft loads first so that an offloaded target's default VRAM budget already excludes it; both are
    looked for before either loads, so a missing target is said at once, not after the draft's load.
    """
    check_model_exists(args.target)
    if need_draft:
        check_model_exists(args.draft)
    progress = (lambda message: print(message, file=sys.stderr)) if not getattr(args, "json", False) else None
    offload = offload_settings(args)
    plan = planned_memory(args)
    draft = load_model(args.draft, dtype=args.dtype, device=args.device, progress=progress, role="draft",
                       **plan) if need_draft else None
    target = load_model(args.target, dtype=args.dtype, device=args.device, progress=progress,
                        offload=offload.with_draft(draft.lm if draft is not None else None), **plan)
    if draft is not None:
        check_same_tokenizer(target.tokenizer, draft.tokenizer, args.target, args.draft)
    return target, draft
