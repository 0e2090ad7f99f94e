"""`specexec generate`: one prompt in, streamed text out (or one JSON object with --json)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from core.cli.options import (
    add_generation_arguments,
    add_grammar_argument,
    decoding_settings,
    grammar_spec,
    longer_context_advice,
    output_controls,
    sampling_params,
)
from core.cli.pair import load_pair
from core.cli.thinking_output import ThinkingPrinter, add_thinking_arguments, template_kwargs
from core.engine.protocol import MAX_TOP_LOGPROBS
from core.errors import ContextLengthError, InvalidSettingError
from core.text.counts import token_count


STDIN_PROMPT = "-"  # `--prompt -`: the prompt is what stdin holds, as `cat`, `curl -d @-` and `llm` read it


def read_stdin_prompt() -> str:
    """All of stdin (a document piped in: `cat notes.txt | specexec generate --prompt -`), without its last line
    end. At a terminal it says first how to end the prompt."""
    if sys.stdin is None:
        raise InvalidSettingError("--prompt - reads the prompt from stdin, and this program has none")
    if sys.stdin.isatty():
        end = "Ctrl-Z then Enter" if sys.platform == "win32" else "Ctrl-D"
        print(f"Type the prompt, then {end} on a line of its own:", file=sys.stderr, flush=True)
    text = sys.stdin.read()
    return text.removesuffix("\n").removesuffix("\r")


def check_continuable(args: argparse.Namespace, messages: tuple[dict, ...], grammar: object) -> None:
    """--continue-final-message's conversation: a --messages-file ending with an answer, and no grammar."""
    from core.text.continuation import answer_to_continue

    if not args.messages_file:
        raise InvalidSettingError("--continue-final-message goes on with the last answer of a --messages-file")
    if grammar is not None:
        raise InvalidSettingError(
            "--continue-final-message cannot be used with a grammar (it would read the answer from its start)"
        )
    answer_to_continue(list(messages))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="prompt text; '-' reads it from stdin (a file piped in)")
    source.add_argument("--messages-file", help="JSON Lines conversation (role/content per line)")
    parser.add_argument("--chat", action="store_true", help="wrap --prompt in the model's chat template")
    parser.add_argument(
        "--continue-final-message",
        action="store_true",
        help="the --messages-file ends with an assistant's answer cut off (content, reasoning_content): go on with "
        "it from its last word instead of writing a new answer; only the new text is printed",
    )
    add_generation_arguments(parser)
    add_grammar_argument(parser)
    add_thinking_arguments(parser)
    parser.add_argument(
        "--logprobs",
        type=int,
        default=None,
        metavar="N",
        help="with --json: each token's log-probability and its N most likely alternatives",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object instead of streaming text (a thinking model's reasoning in its own field)",
    )


def too_long_said(chunks, target, draft, max_new_tokens: int):  # noqa: ANN001, ANN201 - a generator of chunks
    """`chunks` as they come; a prompt too long for --context-length is said with the length that would hold
    it, where the models keep that much (longer_context_advice)."""
    from core.modeling.families import context_limit

    try:
        yield from chunks
    except ContextLengthError as error:
        models = [m.lm for m in (target, draft) if m is not None]
        limits = {
            "max_context": min(m.max_context for m in models),
            "model_context": min(context_limit(m.config) for m in models),
        }
        advice = longer_context_advice(error.prompt_tokens, max_new_tokens, limits)
        if not advice:
            raise
        raise ContextLengthError(f"{error} {advice}", error.prompt_tokens) from error


def run(args: argparse.Namespace) -> int:
    # torch and transformers: here, not at the top, so that `specexec generate --help` answers at once
    from core.decoding.generation import stream_generate
    from core.decoding.methods.step import reported_logprob
    from core.system.threads import apply_torch_threads
    from core.text.prompts import Prompt, answer_thinking, chat_prompt, encode_prompt, read_messages_file

    if args.logprobs is not None and not (args.json and 0 <= args.logprobs <= MAX_TOP_LOGPROBS):
        raise InvalidSettingError(f"--logprobs N needs --json and N between 0 and {MAX_TOP_LOGPROBS}")
    from_stdin = args.prompt == STDIN_PROMPT
    if from_stdin:
        args.prompt = read_stdin_prompt()
    if args.prompt == "" and not args.chat:  # said before the load; some tokenizers would make it a lone BOS
        raise InvalidSettingError(
            "the prompt is empty: stdin held no text" if from_stdin else "the prompt is empty: give --prompt some text"
        )
    settings = decoding_settings(args)
    apply_torch_threads(args.threads)
    params = sampling_params(args)
    spec = grammar_spec(args)
    prompt = read_messages_file(args.messages_file) if args.messages_file else Prompt(text=args.prompt)
    if args.messages_file or args.chat:
        prompt = dataclasses.replace(
            chat_prompt(prompt), template_kwargs=template_kwargs(args), continue_final=args.continue_final_message
        )
    if args.continue_final_message:  # said before the load
        check_continuable(args, prompt.messages or (), spec)
    target, draft = load_pair(args, need_draft=settings.method != "sequential")
    prompt_ids = encode_prompt(target.tokenizer, prompt)
    thinking = answer_thinking(target.tokenizer, prompt)  # a chat: a thinking model's reasoning comes apart
    controls = output_controls(spec, args.max_new_tokens, target, args.logprobs, thinking=thinking)
    chunks = stream_generate(
        target.lm,
        draft.lm if draft else None,
        target.tokenizer,
        prompt_ids,
        params,
        settings,
        controls=controls,
        thinking=thinking,
    )
    printer = ThinkingPrinter(hide=args.hide_thinking)
    text, reasoning, token_ids, passes, finish, seconds = [], [], [], 0, "length", 0.0
    logprobs = []
    choice = None
    for chunk in too_long_said(chunks, target, draft, args.max_new_tokens):
        choice = chunk.choice or choice
        if not args.json:
            printer.write(chunk.reasoning, chunk.text)
        text.append(chunk.text)
        reasoning.append(chunk.reasoning)
        token_ids.extend(chunk.token_ids)
        logprobs.extend(chunk.logprobs or ())
        passes += 1
        seconds += chunk.stats.draft_seconds + chunk.stats.target_seconds
        finish = chunk.finish_reason or finish
    if args.json:
        print(
            json.dumps(
                {
                    "text": "".join(text),
                    **({"reasoning": "".join(reasoning)} if thinking is not None else {}),  # a thinking model's chat
                    "token_ids": token_ids,
                    "finish_reason": finish,
                    "target_passes": passes,
                    "tokens_per_pass": len(token_ids) / max(passes, 1),
                    "seconds": seconds,
                    **(
                        {
                            "logprobs": [
                                {
                                    "logprob": reported_logprob(entry.logprob),
                                    "top": [[token, reported_logprob(value)] for token, value in entry.top],
                                }
                                for entry in logprobs
                            ]
                        }
                        if args.logprobs is not None
                        else {}
                    ),
                }
            )
        )
    else:
        printer.end()
        print()
        print(
            f"[{finish}] {token_count(len(token_ids))} in {passes:,} target passes "
            f"({len(token_ids) / max(passes, 1):.2f} tokens/pass, {len(token_ids) / max(seconds, 1e-9):.2f} tokens/s)",
            file=sys.stderr,
        )
        if choice is not None:
            print(f"[auto] {choice.reason}", file=sys.stderr)
    return 0
