"""The generation stream: EOS, stop strings, exact max_new_tokens, streamed text, same output per method."""

import contextlib
import copy
import dataclasses
import math

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from core.text.detokenize import IncrementalDetokenizer
from core.decoding.device_io import gpu_semantics
from core.decoding.methods.step import OutputControls
from core.errors import ContextLengthError, InvalidSettingError, NumericalError
from core.decoding.generation import generate, stream_generate
from core.decoding.settings import DecodingSettings, SamplingParams, TreeSettings

PROMPT = [1, 9, 12, 30, 7]
PARAMS = SamplingParams(temperature=0.8, top_p=0.95, seed=5)
TREE = TreeSettings(budget=32, max_depth=8, expand=8)


def run(target, draft, tokenizer, method, **settings):
    return generate(target, draft, tokenizer, PROMPT, PARAMS, DecodingSettings(method=method, tree=TREE, **settings))


def test_length_exact_and_methods_agree(tiny_target, tiny_draft, word_tokenizer):
    results = {
        m: run(tiny_target, tiny_draft, word_tokenizer, m, max_new_tokens=23) for m in ("sequential", "specexec")
    }
    for result in results.values():
        assert len(result.token_ids) == 23 and result.finish_reason == "length"
    assert results["sequential"].token_ids == results["specexec"].token_ids
    continuation = word_tokenizer.decode(PROMPT + results["sequential"].token_ids, skip_special_tokens=True)
    assert results["sequential"].text == results["specexec"].text
    assert results["sequential"].text == continuation[len(word_tokenizer.decode(PROMPT, skip_special_tokens=True)) :]
    assert results["specexec"].target_passes < 23


def test_stops_at_any_eos_id(tiny_target, tiny_draft, word_tokenizer):
    reference = run(tiny_target, tiny_draft, word_tokenizer, "sequential", max_new_tokens=30).token_ids
    eos = reference[12]
    first = reference.index(eos)
    unused = next(t for t in range(64) if t not in reference)
    target = dataclasses.replace(tiny_target, eos_token_ids=(unused, eos))  # any of several EOS ids stops
    for method in ("sequential", "specexec"):
        result = run(target, tiny_draft, word_tokenizer, method, max_new_tokens=30)
        assert result.finish_reason == "eos"
        assert result.token_ids == reference[: first + 1]


def test_stop_string_cuts_text_and_tokens(tiny_target, tiny_draft, word_tokenizer):
    reference = run(tiny_target, tiny_draft, word_tokenizer, "sequential", max_new_tokens=30)
    words = reference.text.split()
    stop = f"{words[14]} {words[15]}"  # spans two tokens
    cut = reference.text.index(stop)
    for method in ("sequential", "specexec"):
        chunks = list(
            stream_generate(
                tiny_target,
                tiny_draft,
                word_tokenizer,
                PROMPT,
                PARAMS,
                DecodingSettings(method=method, tree=TREE, max_new_tokens=30, stop=("zzz", stop)),
            )
        )
        text = "".join(c.text for c in chunks)
        assert chunks[-1].finish_reason == "stop"
        assert text == reference.text[:cut]
        ids = [t for c in chunks for t in c.token_ids]
        assert word_tokenizer.decode(ids).find(stop) >= 0  # the token completing the stop string is the last
        assert stop not in word_tokenizer.decode(ids[:-1])


def test_stream_never_shows_a_stop_string_prefix_that_later_completes(tiny_target, tiny_draft, word_tokenizer):
    reference = run(tiny_target, tiny_draft, word_tokenizer, "sequential", max_new_tokens=30)
    stop = reference.text.split()[10] + " w"  # a prefix of the next token's text
    shown = ""
    for chunk in stream_generate(
        tiny_target,
        tiny_draft,
        word_tokenizer,
        PROMPT,
        PARAMS,
        DecodingSettings(method="sequential", max_new_tokens=30, stop=(stop,)),
    ):
        shown += chunk.text
        assert stop not in shown
    assert chunk.finish_reason == "stop"


def test_prompt_longer_than_context(tiny_target, tiny_draft, word_tokenizer):
    with pytest.raises(ContextLengthError, match="context window is 1,024 tokens"):
        generate(tiny_target, tiny_draft, word_tokenizer, [5] * 1024, PARAMS, DecodingSettings())


def test_generation_stops_at_context_end(tiny_target, tiny_draft, word_tokenizer):
    no_eos = dataclasses.replace(tiny_target, eos_token_ids=())
    result = generate(
        no_eos, tiny_draft, word_tokenizer, [5] * 1018, PARAMS, DecodingSettings(tree=TREE, max_new_tokens=50)
    )
    assert len(result.token_ids) == 6 and result.finish_reason == "length"


def test_a_prompt_token_the_weights_have_no_row_for_is_refused_in_words(tiny_target, tiny_draft):
    """A tokenizer that knows more tokens than its model's 64 rows (another model's, or one with added tokens):
    the id used to index past the embedding, a traceback here and a device-side assert on a GPU."""
    from conftest import make_word_tokenizer

    tokenizer = make_word_tokenizer(100)
    for method in ("sequential", "specexec"):
        settings = DecodingSettings(method=method, tree=TREE, max_new_tokens=2)
        with pytest.raises(InvalidSettingError, match=r"holds token 80 \('w80'\), past the 64 tokens this model"):
            generate(tiny_target, tiny_draft, tokenizer, [1, 9, 80], PARAMS, settings)
        assert len(generate(tiny_target, tiny_draft, tokenizer, [1, 9, 63], PARAMS, settings).token_ids) == 2


@pytest.mark.parametrize(
    "method, gpu_path, overlap", [("specexec", False, False), ("specexec", True, True), ("specinfer", False, False)]
)
def test_a_draft_with_fewer_rows_than_its_target_drafts_on(tiny_target, word_tokenizer, method, gpu_path, overlap):
    """Qwen2.5's 0.5B-3B models score 151,936 tokens and its 7B-72B 152,064 (padding rows, one tokenizer).
    A target token past the draft's rows used to index past the draft's embedding; the draft now reads it as
    its last row, and SpecExec's answer is still sequential decoding's, token for token."""
    from conftest import make_tiny_llama

    narrow = make_tiny_llama(1, vocab=40)
    settings = DecodingSettings(method=method, tree=dataclasses.replace(TREE, overlap=overlap), max_new_tokens=24)
    emitted = []
    for seed in range(4):
        params = SamplingParams(temperature=1.0, seed=seed)  # hot: the target emits tokens 40-63 the draft lacks
        with gpu_semantics() if gpu_path else contextlib.nullcontext():
            got = generate(tiny_target, narrow, word_tokenizer, PROMPT, params, settings)
        emitted += got.token_ids
        if method == "specexec":  # SpecInfer samples the target's distribution, not sequential decoding's draws
            sequential = dataclasses.replace(settings, method="sequential")
            assert got.token_ids == generate(tiny_target, None, word_tokenizer, PROMPT, params, sequential).token_ids
    assert any(token >= 40 for token in emitted[:-1])  # and the draft read it: a token followed it


def with_nan_scores(model, token: int = 5):
    """A copy of `model` whose next-token score for `token` is NaN at every position (a NaN in its LM head's
    row), as a 16-bit overflow or a damaged weight makes one."""
    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.model.lm_head.weight[token, 0] = math.nan
    return broken


@pytest.mark.parametrize("method", ["sequential", "specexec", "specinfer"])
@pytest.mark.parametrize("greedy", [False, True])
def test_scores_that_overflowed_are_an_error_in_words_not_an_answer(
    tiny_target, tiny_draft, word_tokenizer, method, greedy
):
    """argmax and the Gumbel draw both pick a NaN, so such a model used to answer with whatever token the NaN
    sat at (here token 5; in the field an end of text: an empty answer with no reason given)."""
    params = SamplingParams(temperature=0.0 if greedy else 0.8, seed=5)
    settings = DecodingSettings(method=method, tree=TREE, max_new_tokens=8)
    for gpu_path in (False, True) if method == "specexec" else (False,):  # the GPU's read-free walk as well
        # log-probabilities index by the drawn token (SpecInfer gives none)
        for controls in (None, OutputControls(top_logprobs=2)) if method != "specinfer" else (None,):
            with gpu_semantics() if gpu_path else contextlib.nullcontext():
                with pytest.raises(NumericalError, match="came out as NaN or infinity.*bfloat16 or float32"):
                    generate(
                        with_nan_scores(tiny_target),
                        tiny_draft,
                        word_tokenizer,
                        PROMPT,
                        params,
                        settings,
                        controls=controls,
                    )


@pytest.mark.parametrize("gpu_path", [False, True])
def test_a_nan_row_met_deep_in_the_tree_walk_is_an_error_even_with_log_probabilities(gpu_path):
    """The walk accepts the root's draw (node 1) and meets a NaN in node 1's row: its mark (-1) must not index
    the log-probabilities (a gather past the row: a traceback here, a device-side assert on a GPU) or the
    penalties, and the read raises on it."""
    from core.decoding.sampling import NON_FINITE_TOKEN
    from core.decoding.verification import read_verdict, walk_tree
    from core.modeling.causal_lm import RowLogits

    vocab = 16
    head = torch.nn.Linear(vocab, vocab, bias=False).double()
    torch.nn.init.eye_(head.weight)
    hidden = torch.zeros(2, vocab, dtype=torch.float64)
    hidden[0, 7] = 9.0  # the root's likeliest token is 7: node 1's
    hidden[1, 3] = math.nan
    tokens, parents = torch.tensor([0, 7]), torch.tensor([-1, 0])
    params = SamplingParams(temperature=0.0, repetition_penalty=1.2)
    penalized = torch.zeros(vocab, dtype=torch.bool)
    with gpu_semantics() if gpu_path else contextlib.nullcontext():
        walk = walk_tree(
            tokens,
            parents,
            torch.ones(2, dtype=torch.bool),
            RowLogits(hidden, head),
            params,
            4,
            penalized,
            3,
            top_logprobs=2,
        )
    assert walk.path.tolist()[:2] == [0, 1] and walk.tokens.tolist()[:2] == [7, NON_FINITE_TOKEN]
    with pytest.raises(NumericalError):
        read_verdict(walk.path.tolist(), walk.tokens.tolist())


def test_a_draft_whose_scores_overflowed_still_gives_the_target_s_own_answer(tiny_target, tiny_draft, word_tokenizer):
    """Only the target's scores are ever sampled: a draft's NaN costs accepted tokens, never a wrong one."""
    settings = DecodingSettings(method="specexec", tree=TREE, max_new_tokens=16)
    reference = generate(
        tiny_target, None, word_tokenizer, PROMPT, PARAMS, dataclasses.replace(settings, method="sequential")
    )
    got = generate(tiny_target, with_nan_scores(tiny_draft), word_tokenizer, PROMPT, PARAMS, settings)
    assert got.token_ids == reference.token_ids


@pytest.mark.parametrize("kwargs", [dict(max_new_tokens=0), dict(method="beam"), dict(stop=("",))])
def test_bad_settings(kwargs):
    with pytest.raises(InvalidSettingError):
        DecodingSettings(**kwargs)


def test_budget_below_one_is_refused():
    with pytest.raises(InvalidSettingError, match="budget"):
        TreeSettings(budget=0)


def sentencepiece_like_tokenizer():
    """BPE with a Metaspace pre-tokenizer and byte fallback: spaces live in tokens as '▁', like Llama 2."""
    backend = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
    backend.normalizer = normalizers.Replace(" ", "▁")
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    backend.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    bytes_tokens = [f"<0x{i:02X}>" for i in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>"] + bytes_tokens)
    backend.train_from_iterator(["hello world the quick brown fox jumps over the lazy dog"] * 50, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


@pytest.mark.parametrize("text", ["hello world, the fox jumps", "naïve café — 世界 🙂 ok", "  two  spaces"])
def test_incremental_detokenizer_matches_full_decode(text):
    tokenizer = sentencepiece_like_tokenizer()
    prompt = tokenizer("the prompt")["input_ids"]
    generated = tokenizer(text, add_special_tokens=False)["input_ids"]
    detok = IncrementalDetokenizer(tokenizer, prompt)
    deltas = [detok.push(t) for t in generated]
    assert all("\ufffd" not in d for d in deltas)  # never a split multi-byte character
    full = tokenizer.decode(prompt + generated, skip_special_tokens=True)
    assert "".join(deltas) == full[len(tokenizer.decode(prompt, skip_special_tokens=True)) :]
    assert "".join(deltas).startswith(" ")  # the SentencePiece space before the first new word survives


def test_pass_stats_count_only_the_tokens_the_chunk_delivers(tiny_target, word_tokenizer):
    """A pass that accepts tokens past an EOS or a stop string delivers only those up to it; its stats must
    say so, or the per-answer count (the app's, from PassStats) exceeds what was generated (issue 13, #7).
    The draft is the target itself, so passes accept several tokens and some cuts land mid-pass."""
    reference = run(tiny_target, tiny_target, word_tokenizer, "sequential", max_new_tokens=30).token_ids
    cases = [dict(eos=reference[cut]) for cut in range(3, 9)] + [
        dict(stop=word_tokenizer.decode([reference[cut]])) for cut in range(3, 9)
    ]
    for case in cases:
        target = dataclasses.replace(tiny_target, eos_token_ids=(case.get("eos", -1),))
        stop = (case["stop"],) if "stop" in case else ()
        chunks = list(
            stream_generate(
                target,
                tiny_target,
                word_tokenizer,
                PROMPT,
                PARAMS,
                DecodingSettings(method="specexec", tree=TREE, max_new_tokens=30, stop=stop),
            )
        )
        assert chunks[-1].finish_reason in ("eos", "stop"), case
        assert [c.stats.tokens for c in chunks] == [len(c.token_ids) for c in chunks], case
