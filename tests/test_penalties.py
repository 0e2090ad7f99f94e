"""OpenAI's presence and frequency penalties (issue 34): the logit adjustment on hand-written vectors, the same
tokens from SpecExec (CPU and GPU paths, every budget) as from sequential decoding with them on, counted over
the answer only (not the prompt), as vLLM counts them."""

import contextlib
import dataclasses

import pytest
import torch

from core.decoding.decode_state import DecodeState
from core.decoding.device_io import gpu_semantics
from core.errors import InvalidSettingError
from core.decoding.generation import generate
from core.decoding.settings import DecodingSettings, SamplingParams, TreeSettings
from core.decoding.methods.sequential import sequential_steps
from core.decoding.methods.specexec import specexec_steps
from core.decoding.sampling import apply_occurrence_penalties, occurrence_counts, process_logits
from pairwise import all_pairs

PROMPT = [1, 17, 5, 33, 8, 2, 40]


def test_the_adjustment_on_a_hand_written_vector():
    logits = torch.tensor([2.0, 1.0, -1.0, 0.5], dtype=torch.float64)
    counts = occurrence_counts([1, 1, 3], 4, "cpu")
    assert counts.tolist() == [0.0, 2.0, 0.0, 1.0]
    got = apply_occurrence_penalties(logits, counts, presence=0.5, frequency=0.25)
    assert got.tolist() == [2.0, 1.0 - 0.5 - 0.5, -1.0, 0.5 - 0.25 - 0.5]
    assert apply_occurrence_penalties(logits, counts, -1.0, 0.0).tolist() == [2.0, 2.0, -1.0, 1.5]  # negative: favours
    # after the repetition penalty, before temperature (vLLM's order); greedy is changed by it too
    params = SamplingParams(temperature=0.0, repetition_penalty=2.0, presence_penalty=1.0)
    penalized = torch.tensor([False, True, False, False])
    scores = process_logits(logits[None], params, penalized[None], counts=counts[None])[0]
    assert scores.tolist() == [2.0, 1.0 / 2.0 - 1.0, -1.0, 0.5 - 1.0]


@pytest.mark.parametrize("value", [2.5, -2.01, float("nan"), float("inf")])
def test_out_of_range_penalties_are_refused(value):
    with pytest.raises(InvalidSettingError, match="between -2 and 2"):
        SamplingParams(presence_penalty=value)
    with pytest.raises(InvalidSettingError, match="between -2 and 2"):
        SamplingParams(frequency_penalty=value)


def _sequential(target, params, n, prompt=PROMPT):
    state = DecodeState.fresh(prompt, target, None)
    state.answer_start = len(prompt)
    return [t for step in sequential_steps(state, target, params, n) for t in step.token_ids]


def _specexec(target, draft, params, tree, n, prompt=PROMPT):
    state = DecodeState.fresh(prompt, target, draft)
    state.answer_start = len(prompt)
    return [t for step in specexec_steps(state, target, draft, params, tree, n) for t in step.token_ids]


SAMPLING = [(0.0, 1.0), (0.8, 0.9), (1.0, 1.0)]  # (temperature, top_p)
PENALTIES = [(0.8, 0.0, 1.0), (0.0, 1.5, 1.0), (1.2, 0.6, 1.3), (-0.7, -0.4, 1.0)]  # presence, frequency, repetition
TREES = [(1, 1, 1, False), (16, 4, 4, False), (64, 8, 16, False), (48, 8, 8, True)]  # budget, depth, expand, GPU walk
# every sampling, penalty set, tree and seed, and every pair of them: 16 runs where the product is 96
CASES = all_pairs(SAMPLING, PENALTIES, TREES, [0, 1])


@pytest.mark.parametrize(
    "sampling,penalties,tree,seed",
    CASES,
    ids=[f"T{s[0]}-p{s[1]}-pen{'/'.join(map(str, p))}-K{t[0]}{'-gpu' if t[3] else ''}-s{n}" for s, p, t, n in CASES],
)
def test_specexec_equals_sequential_with_penalties_on(
    tiny_target, tiny_draft, one_torch_thread, sampling, penalties, tree, seed
):
    """Same seed, same tokens: the tree walk adds each accepted token to the counts of the next step, as
    sequential decoding does (on the GPU's fixed-length walk too); the penalties change the answer (so the test
    would see them skipped)."""
    temperature, top_p = sampling
    presence, frequency, repetition = penalties
    budget, depth, expand, gpu_walk = tree
    params = SamplingParams(
        temperature=temperature,
        top_p=top_p,
        repetition_penalty=repetition,
        presence_penalty=presence,
        frequency_penalty=frequency,
        seed=seed,
    )
    expected = _sequential(tiny_target, params, 30)
    with gpu_semantics() if gpu_walk else contextlib.nullcontext():
        assert _specexec(tiny_target, tiny_draft, params, TreeSettings(budget, depth, expand), 30) == expected
    without_them = dataclasses.replace(params, presence_penalty=0.0, frequency_penalty=0.0)
    assert _sequential(tiny_target, without_them, 30) != expected


def test_penalties_count_the_answer_not_the_prompt(tiny_target):
    """Each greedy token is the argmax of the logits less the penalties of the answer's tokens so far; the
    prompt's tokens are not counted."""
    params = SamplingParams(temperature=0.0, presence_penalty=1.5, frequency_penalty=0.5)
    tokens = _sequential(tiny_target, params, 20)
    context = list(PROMPT)
    for token in tokens:
        with torch.no_grad():
            logits = tiny_target.model(torch.tensor([context])).logits[0, -1].double()
        answer = context[len(PROMPT) :]
        expected = logits.clone()
        for other in set(answer):
            expected[other] -= 1.5 + 0.5 * answer.count(other)
        assert token == int(expected.argmax())
        context.append(token)


def test_through_the_generation_stream_and_specinfer_refuses(tiny_target, tiny_draft, word_tokenizer):
    params = SamplingParams(temperature=0.7, presence_penalty=1.0, seed=4)
    runs = [
        generate(
            tiny_target,
            tiny_draft,
            word_tokenizer,
            PROMPT,
            params,
            DecodingSettings(method=method, tree=TreeSettings(16, 4, 4), max_new_tokens=20),
        ).token_ids
        for method in ("specexec", "sequential", "auto")
    ]
    assert runs[0] == runs[1] == runs[2]
    with pytest.raises(InvalidSettingError, match="not SpecInfer"):
        generate(
            tiny_target,
            tiny_draft,
            word_tokenizer,
            PROMPT,
            params,
            DecodingSettings(method="specinfer", tree=TreeSettings(16, 4, 4), max_new_tokens=4),
        )


def test_an_answer_without_max_new_tokens_runs_to_the_end_of_the_context(tmp_path):
    """Generate.max_new_tokens None (the API's request without max_tokens): the answer stops at the context's
    end, not at a fixed count (a tiny pair that never writes its EOS, a 64-token context)."""
    from app_fixtures import save_tiny_pair
    from conftest import in_process_engine, torch_threads
    from core.engine import protocol as P

    target, draft = save_tiny_pair(tmp_path)
    with torch_threads(1):
        _, serve = in_process_engine()
        serve(
            P.Load(
                target=target,
                draft=draft,
                dtype="float32",
                device="cpu",
                budget=8,
                max_depth=4,
                expand=4,
                context_length=64,
            )
        )
        events = serve(
            P.Generate(
                request_id="r",
                messages=({"role": "user", "content": "w10 w11"},),
                max_new_tokens=None,
                presence_penalty=0.5,
                method="specexec",
            )
        )
    finished = events[-1]
    assert isinstance(finished, P.Finished) and finished.reason == "length"
    assert finished.prompt_tokens + finished.generated_tokens == 64
