"""`specexec generate`: one prompt in, streamed text out (or one JSON object with --json)."""

from __future__ import annotations

import argparse
import json
import sys

from core.cli.pair import load_pair
from core.cli.options import add_generation_arguments, decoding_settings, sampling_params
from core.generation import stream_generate
from core.threads import apply_torch_threads
from core.prompts import Prompt, encode_prompt, read_messages_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="prompt text")
    source.add_argument("--messages-file", help="JSON Lines conversation (role/content per line)")
    parser.add_argument("--chat", action="store_true", help="wrap --prompt in the model's chat template")
    add_generation_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of streaming text")


def run(args: argparse.Namespace) -> int:
    settings = decoding_settings(args)
    apply_torch_threads(args.threads)
    params = sampling_params(args)
    prompt = read_messages_file(args.messages_file) if args.messages_file else Prompt(text=args.prompt)
    target, draft = load_pair(args, need_draft=settings.method != "sequential")
    prompt_ids = encode_prompt(target.tokenizer, prompt, chat=args.chat)
    chunks = stream_generate(
        target.lm, draft.lm if draft else None, target.tokenizer, prompt_ids, params, settings
    )
    text, token_ids, passes, finish, seconds = [], [], 0, "length", 0.0
    choice = None
    for chunk in chunks:
        choice = chunk.choice or choice
        if not args.json:
            print(chunk.text, end="", flush=True)
        text.append(chunk.text)
        token_ids.extend(chunk.token_ids)
        passes += 1
        seconds += chunk.stats.draft_seconds + chunk.stats.target_seconds
        finish = chunk.finish_reason or finish
    if args.json:
        print(json.dumps({
            "text": "".join(text),
            "token_ids": token_ids,
            "finish_reason": finish,
            "target_passes": passes,
            "tokens_per_pass": len(token_ids) / max(passes, 1),
            "seconds": seconds,
        }))
    else:
        print()
        print(
            f"[{finish}] {len(token_ids)} tokens in {passes} target passes "
            f"({len(token_ids) / max(passes, 1):.2f} tokens/pass, {len(token_ids) / max(seconds, 1e-9):.2f} tokens/s)",
            file=sys.stderr,
        )
        if choice is not None:
            print(f"[auto] {choice.reason}", file=sys.stderr)
    return 0
