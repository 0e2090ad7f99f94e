"""Flags shared by commands that load models and sample (generate, chat, bench).

The parsers are built from modules that import neither torch nor transformers (`--help` answers at once); what
turns the flags into settings imports the decoding modules when it runs."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from core.decoding.defaults import DEFAULT_BUDGET, DEFAULT_MAX_DEPTH, METHODS
from core.planning.budgets import AUTO_MAX_BUDGET
from core.planning.graph_plan import DEFAULT_EXPAND
from core.planning.residency import MIN_CONTEXT, context_to_hold

if TYPE_CHECKING:
    from core.decoding.constraints import GrammarSpec
    from core.decoding.settings import DecodingSettings, SamplingParams, TreeSettings
    from core.loading.offload_settings import OffloadSettings


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default="builtin", help="folder, .gguf file, cached repo id, or 'builtin'")
    parser.add_argument(
        "--draft", default="builtin-draft", help="folder, .gguf file, cached repo id, or 'builtin-draft'"
    )
    parser.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="where the models run (auto: the NVIDIA GPU if there is one that works, else the CPU)",
    )
    parser.add_argument(
        "--dtype",
        choices=["auto", "float32", "float16", "bfloat16"],
        default="auto",
        help="number format of the weights in use (auto: bfloat16 or float16 on a GPU, float32 on the CPU)",
    )
    parser.add_argument(
        "--offload",
        choices=["auto", "on", "off"],
        default="auto",
        help="stream the target's layers from host RAM (auto: GPTQ, or when it does not fit in VRAM)",
    )
    parser.add_argument(
        "--vram-budget",
        type=float,
        default=None,
        metavar="GB",
        help="VRAM for the offloaded target's weights (default: free VRAM minus draft, caches, margin)",
    )
    parser.add_argument(
        "--resident-layers",
        default="auto",
        metavar="N|auto",
        help="offloaded target layers kept on the GPU (auto: as many as the budget allows)",
    )
    parser.add_argument(
        "--context-length",
        # the model's own limit, the other bound, is known only once it loads (residency.resolve_context_length)
        type=whole_number_at_least(MIN_CONTEXT, f"the context length must be at least {MIN_CONTEXT} tokens"),
        default=None,
        metavar="N",
        help="tokens of conversation the KV caches are sized for (default 4096, at most the "
        "model's limit); longer conversations drop their oldest turns",
    )


def whole_number_at_least(minimum: int, words: str) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `minimum`, refused when the flags are read rather than after
    the minutes a model takes to load. `words` state the bound, e.g. "threads must be at least 1"."""

    def value(text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if number < minimum:
            raise argparse.ArgumentTypeError(f"{words}, got {number}")
        return number

    return value


def int_list(text: str) -> list[int]:
    """A comma-separated list of whole numbers (the benchmarks' sweeps: budgets, rows, card sizes)."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected whole numbers separated by commas, got {text!r}") from None


def budget_list(text: str) -> list[int]:
    """A benchmark's --budgets: each one a budget a pass can take (checked before any model loads)."""
    from core.errors import InvalidSettingError
    from core.planning.budgets import check_tree_budget

    try:
        return [check_tree_budget(budget) for budget in int_list(text)]
    except InvalidSettingError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def budget_value(text: str) -> int | str:
    """--budget: a number of draft tokens or 'auto', in any case (range checks are TreeSettings', with a plain
    error)."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of draft tokens or 'auto', got {text!r}") from None


def add_tree_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--budget",
        type=budget_value,
        default="auto",
        help="draft tokens per target pass (K), or auto: chosen for this machine (default)",
    )
    parser.add_argument(
        "--max-depth", type=int, default=DEFAULT_MAX_DEPTH, help="deepest draft node (D; default %(default)s)"
    )
    parser.add_argument(
        "--expand",
        type=int,
        default=DEFAULT_EXPAND,
        help="nodes expanded per draft forward (B), at least; widened to budget/8 for big budgets "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--draft-top-p", action="store_true", help="truncate the draft tree to the target's top-p nucleus"
    )


def add_sampling_arguments(parser: argparse.ArgumentParser, temperature: float = 0.7, top_p: float = 0.9) -> None:
    parser.add_argument(
        "--temperature",
        type=float,
        default=temperature,
        help="how varied answers are (0 = always the likeliest token; default %(default)s)",
    )
    parser.add_argument(
        "--top-p",
        type=float,
        default=top_p,
        help="sample only from the likeliest tokens that make up this share of the probability "
        "(1 = off; default %(default)s)",
    )
    parser.add_argument("--top-k", type=int, default=0, help="sample only from this many likeliest tokens (0 = off)")
    parser.add_argument(
        "--repetition-penalty",
        type=float,
        default=1.0,
        help="lower the odds of tokens already in the conversation (1 = off; 1.1 is mild)",
    )
    parser.add_argument(
        "--presence-penalty",
        type=float,
        default=0.0,
        help="OpenAI's: lowers every token the answer already has (-2..2, 0 = off)",
    )
    parser.add_argument(
        "--frequency-penalty",
        type=float,
        default=0.0,
        help="OpenAI's: lowers a token by how often the answer already has it (-2..2, 0 = off)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="the random draws' seed: the same seed and settings give the same text (default %(default)s)",
    )


def add_threads_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--threads",
        type=whole_number_at_least(1, "threads must be at least 1"),
        default=None,
        metavar="N",
        help="CPU threads for torch (default: physical cores minus one, at least 1)",
    )


def add_engine_benchmark_arguments(parser: argparse.ArgumentParser) -> None:
    """What the benchmarks that drive the engine process share (bench chat, bench serve): the models, an
    explicit method and a small tree, so runs compare like with like; threads for the engine."""
    add_model_arguments(parser)
    parser.add_argument(
        "--method",
        choices=["specexec", "specinfer", "sequential"],
        default="specexec",
        help="how the engine decodes (default %(default)s; sequential: the target alone)",
    )
    parser.add_argument("--budget", type=int, default=32, help="draft tokens per target pass (default %(default)s)")
    parser.add_argument("--max-depth", type=int, default=8, help="deepest draft node (default %(default)s)")
    parser.add_argument("--expand", type=int, default=8, help="nodes expanded per draft forward (default %(default)s)")
    add_threads_argument(parser)


def add_generation_arguments(parser: argparse.ArgumentParser) -> None:
    """Everything `generate` and `chat` share."""
    add_model_arguments(parser)
    add_threads_argument(parser)
    parser.add_argument(
        "--method",
        choices=METHODS,
        default="auto",
        help="auto (default): plain decoding or SpecExec, whichever is faster on this machine",
    )
    add_tree_arguments(parser)
    add_sampling_arguments(parser)
    parser.add_argument(
        "--max-new-tokens",
        # `serve` takes it as its requests' default: a 0 there would start a server that refuses every answer
        type=whole_number_at_least(1, "max new tokens must be at least 1"),
        default=256,
        help="the longest answer, in tokens (about 3/4 of a word each; default %(default)s)",
    )
    parser.add_argument("--stop", action="append", default=[], metavar="STR", help="stop string (repeatable)")


def offload_settings(args: argparse.Namespace) -> OffloadSettings:
    from core.loading.offload_settings import OffloadSettings, parse_resident_layers

    return OffloadSettings(
        mode=args.offload,
        vram_budget_gb=args.vram_budget,
        resident_layers=parse_resident_layers(args.resident_layers),
        tree_budget=_largest_budget(args),
    )


def engine_load_settings(args: argparse.Namespace) -> dict[str, object]:
    """The model flags as fields of the engine's Load request (commands that drive the engine process)."""
    offload_settings(args)  # bad offload flags fail here, before an engine starts
    return dict(
        dtype=args.dtype,
        device=args.device,
        offload=args.offload,
        vram_budget_gb=args.vram_budget,
        resident_layers=args.resident_layers,
        context_length=args.context_length,
    )


def planned_memory(args: argparse.Namespace) -> dict[str, int | None]:
    """The context and tree every model of the command is planned for (load_model's keyword arguments)."""
    return dict(context_length=args.context_length, tree_budget=_largest_budget(args))


def _largest_budget(args: argparse.Namespace) -> int:
    """The biggest tree the command will score: it sizes the activations an offloaded target reserves."""
    budgets = getattr(args, "budgets", None) or [getattr(args, "budget", DEFAULT_BUDGET)]
    return max(AUTO_MAX_BUDGET if b == "auto" else b for b in budgets)


def add_overlap_arguments(parser: argparse.ArgumentParser) -> None:
    """--no-overlap and --shadow-forwards, for the bench commands (they run the overlap on any device)."""
    parser.add_argument(
        "--no-overlap",
        action="store_true",
        help="no shadow search while the target's pass runs; each search starts from its root "
        "(also SPECEXEC_OVERLAP=0)",
    )
    parser.add_argument(
        "--shadow-forwards",
        type=int,
        default=None,
        metavar="N",
        help="draft forwards of the shadow search per pass (default: as many as the last target pass's time holds)",
    )


def tree_settings(args: argparse.Namespace, budget: int | None = None) -> TreeSettings:
    """The tree flags; an automatic --budget becomes the largest budget the tuner may pick. The overlap is on
    for commands with --no-overlap (bench commands: on any device, unless it or SPECEXEC_OVERLAP=0 says no)."""
    from core.decoding.settings import TreeSettings, overlap_wanted, resolve_budget

    if budget is None:
        budget, _ = resolve_budget(args.budget, getattr(args, "method", "specexec"))
    measuring = hasattr(args, "no_overlap")
    return TreeSettings(
        budget=budget,
        max_depth=args.max_depth,
        expand=args.expand,
        draft_top_p=args.draft_top_p,
        overlap=measuring and overlap_wanted("cpu", args.no_overlap, measuring=True),
        shadow_forwards=getattr(args, "shadow_forwards", None),
    )


def sampling_params(args: argparse.Namespace, seed: int | None = None) -> SamplingParams:
    from core.decoding.settings import SamplingParams

    return SamplingParams(
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        repetition_penalty=getattr(args, "repetition_penalty", 1.0),
        seed=args.seed if seed is None else seed,
        presence_penalty=getattr(args, "presence_penalty", 0.0),
        frequency_penalty=getattr(args, "frequency_penalty", 0.0),
    )


def decoding_settings(args: argparse.Namespace) -> DecodingSettings:
    from core.decoding.settings import DecodingSettings, resolve_budget

    _, auto_budget = resolve_budget(args.budget, args.method)
    return DecodingSettings(
        method=args.method,
        tree=tree_settings(args),
        max_new_tokens=args.max_new_tokens,
        stop=tuple(args.stop),
        auto_budget=auto_budget,
    )


def add_grammar_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json-schema",
        default=None,
        metavar="FILE|object",
        help="decode under a grammar: the JSON schema in FILE, or 'object' (any JSON object)",
    )


def grammar_spec(args: argparse.Namespace) -> GrammarSpec | None:
    """The grammar --json-schema asks for, or None; read and checked before any model loads, so that a missing
    file or a schema the grammar engine cannot use is an error at once, not after minutes of loading.
    Raises InvalidSettingError (GrammarError for an unusable schema)."""
    if args.json_schema is None:
        return None
    from core.decoding.constraints import GrammarSpec
    from core.errors import InvalidSettingError
    from core.system.text_files import read_text_file

    if args.json_schema == "object":
        return GrammarSpec("json_object")
    try:
        spec = GrammarSpec("json_schema", read_text_file(args.json_schema))
    except OSError as error:
        hint = " (--json-schema takes a file's path or 'object': save the schema to a file)"
        inline = args.json_schema.lstrip().startswith("{")
        raise InvalidSettingError(
            f"cannot read the JSON schema file {args.json_schema}: {error.strerror}{hint if inline else ''}"
        ) from error
    spec.grammar()  # the check: the schema compiles (no tokenizer needed yet)
    return spec


def output_controls(
    spec: GrammarSpec | None,
    max_new_tokens: int | None,
    target,
    top_logprobs: int | None = None,
    mask_draft: bool = True,
    thinking=None,
):
    """OutputControls for one answer (a fresh grammar state) under `spec` (grammar_spec's), or None when nothing
    is asked. target: the LoadedModel whose tokenizer the grammar reads; thinking: a thinking model's
    ThinkingFormat (the grammar then holds after its reasoning)."""
    if spec is None and top_logprobs is None:
        return None
    from core.decoding.constraints import GrammarConstraint
    from core.decoding.methods.step import OutputControls

    grammar = None
    if spec is not None:
        # a thought may take half the answer's tokens, so that the answer the schema asks for comes after it
        budget = max_new_tokens // 2 if thinking is not None and max_new_tokens else None
        grammar = GrammarConstraint(
            spec, target.tokenizer, target.lm.vocab_size, tuple(target.lm.eos_token_ids), thinking, budget
        )
    return OutputControls(grammar, top_logprobs, mask_draft)


def longer_context_advice(prompt_tokens: int, max_new_tokens: int, models: dict) -> str:
    """For a message too long for the context the models were loaded with: the --context-length that would
    hold it (in steps of 1,024, at most the models' own limit), where they keep that much; "" otherwise (the
    error's own hint, shorten it, is then all there is)."""
    ceiling, in_force = int(models.get("model_context") or 0), int(models.get("max_context") or 0)
    length = context_to_hold(prompt_tokens, max_new_tokens, in_force, ceiling, range(1024, ceiling + 1024, 1024))
    return f"(these models keep up to {ceiling:,} tokens: --context-length {length} holds it)" if length else ""
