"""Structured output and log-probabilities in the decoding loop (issue 24): under a grammar, SpecExec emits
exactly the tokens of sequential sampling with the same seed and the answer parses; the draft proposes only
what the grammar allows; each emitted token's log-probability is that of the distribution it was drawn from,
equal between SpecExec and sequential decoding (float64) and to a direct computation."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import pytest
import torch

from transformers import PreTrainedTokenizerBase

from core.decoding.constraints import GrammarConstraint, GrammarSpec
from core.errors import InvalidSettingError
from core.modeling.causal_lm import CausalLM
from core.decoding.generation import generate, stream_generate
from core.decoding.settings import DecodingSettings, SamplingParams, TreeSettings
from core.decoding.methods.step import OutputControls
from core.server.tool_calls import forced_call_grammar

pytestmark = pytest.mark.timeout(600)

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class _Loaded:
    lm: CausalLM
    tokenizer: PreTrainedTokenizerBase


@pytest.fixture(scope="module")
def spelling_pair():
    """A tiny pair that spells like the built-in model, and a prompt: the built-in model's tokenizer (byte-level
    BPE, a real vocabulary, its chat template) on a small random float32 Llama, and a noisy copy as the draft,
    so trees get accepted the way a quantised draft's are. What these tests check (exactness under a grammar,
    the masks, the parse) holds for any weights; the real weights would only make each forward ~50x dearer.
    The built-in model's conversion makes the tests that take it slow."""
    from transformers import AutoTokenizer

    from conftest import make_tiny_llama, noisy_copy, sharpen
    from core.loading.builtin import ensure_converted
    from core.text.prompts import Prompt, encode_prompt

    tokenizer = AutoTokenizer.from_pretrained(ensure_converted())
    tiny = sharpen(make_tiny_llama(0, vocab=len(tokenizer), hidden=64, dtype=torch.float32), 4.0)
    target = replace(tiny, eos_token_ids=(tokenizer.eos_token_id,))
    draft = replace(noisy_copy(target), eos_token_ids=target.eos_token_ids)
    prompt = encode_prompt(tokenizer, Prompt(messages=({"role": "user", "content": "Describe a person in JSON."},)))
    return _Loaded(target, tokenizer), _Loaded(draft, tokenizer), prompt


def _constraint(spelling_pair, spec: GrammarSpec) -> GrammarConstraint:
    target = spelling_pair[0]
    return GrammarConstraint(spec, target.tokenizer, target.lm.vocab_size, target.lm.eos_token_ids)


def _run(spelling_pair, spec, params, method, budget=32, top=None, max_new=40):
    target, draft, prompt = spelling_pair
    controls = OutputControls(_constraint(spelling_pair, spec), top)
    settings = DecodingSettings(method=method, tree=TreeSettings(budget, 12, 8), max_new_tokens=max_new)
    return generate(
        target.lm,
        draft.lm if method == "specexec" else None,
        target.tokenizer,
        prompt,
        params,
        settings,
        controls=controls,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec", [GrammarSpec("json_schema", json.dumps(PERSON)), GrammarSpec("json_object")], ids=["schema", "json-mode"]
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_specexec_under_a_grammar_equals_sequential_and_parses(spelling_pair, spec, seed):
    params = SamplingParams(temperature=0.9, top_p=0.95, seed=seed)
    sequential = _run(spelling_pair, spec, params, "sequential")
    for budget in (8, 48):
        specexec = _run(spelling_pair, spec, params, "specexec", budget)
        assert specexec.token_ids == sequential.token_ids, (budget, specexec.text, sequential.text)
    if spec.kind == "json_schema":  # small enough to finish: it always parses and matches the schema
        assert sequential.finish_reason == "eos", sequential.text
        person = json.loads(sequential.text)
        assert set(person) == {"name", "age"} and isinstance(person["age"], int) and len(person["name"]) <= 12
    elif sequential.finish_reason == "eos":
        assert isinstance(json.loads(sequential.text), dict)
    else:  # cut by max_new_tokens: still a prefix of a JSON object
        assert sequential.text.startswith("{")


@pytest.mark.slow
def test_greedy_under_a_grammar_equals_greedy(spelling_pair):
    spec = GrammarSpec("json_schema", json.dumps(PERSON))
    params = SamplingParams(temperature=0.0)
    assert (
        _run(spelling_pair, spec, params, "specexec", 64).token_ids
        == _run(spelling_pair, spec, params, "sequential").token_ids
    )


@pytest.mark.slow
def test_the_draft_proposes_only_what_the_grammar_allows(spelling_pair):
    """Every real node of every draft tree is a legal continuation of its path (checked with a fresh matcher)."""
    from core.decoding.decode_state import DecodeState
    from core.decoding.draft_search import SearchConfig, build_draft_tree

    target, draft, prompt = spelling_pair
    spec = GrammarSpec("json_schema", json.dumps(PERSON))
    grammar = _constraint(spelling_pair, spec)
    state = DecodeState.fresh(prompt, target.lm, draft.lm)
    config = SearchConfig(48, 8, 8, 1.0, None, child_mask=grammar.child_allowed)
    tree = build_draft_tree(draft.lm, state.draft_cache, state.prefill_pending(draft.lm, state.draft_cache), config)
    tokens, parents, valid = tree.tokens.tolist(), tree.parents.tolist(), tree.valid.tolist()
    assert sum(valid) > 10
    import llguidance

    from core.decoding.constraints import bridge_for

    for node in range(1, len(tokens)):
        if not valid[node]:
            continue
        path, walk = [], node
        while walk > 0:
            path.append(tokens[walk])
            walk = parents[walk]
        checker = llguidance.LLMatcher(
            bridge_for(target.tokenizer, target.lm.vocab_size, target.lm.eos_token_ids), spec.grammar(), log_level=0
        )
        assert checker.try_consume_tokens(path[::-1]) == len(path), target.tokenizer.decode(path[::-1])


@pytest.mark.slow
def test_a_forced_tool_call_is_written_in_the_models_format(spelling_pair):
    from core.text.tool_format import HERMES, LLAMA3_JSON
    from core.text.tool_calls import parse_answer

    tools = (
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}},
                    "required": ["unit"],
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "search",
                "parameters": {
                    "type": "object",
                    "properties": {"page": {"type": "integer", "minimum": 1, "maximum": 9}},
                    "required": ["page"],
                },
            },
        },
    )
    names = frozenset({"get_weather", "search"})
    for fmt, name in ((HERMES, "search"), (LLAMA3_JSON, None)):
        spec = GrammarSpec("lark", forced_call_grammar(fmt, tools, name))
        answer = _run(spelling_pair, spec, SamplingParams(temperature=1.0, seed=3), "specexec", max_new=60)
        assert (
            answer.token_ids
            == _run(spelling_pair, spec, SamplingParams(temperature=1.0, seed=3), "sequential", max_new=60).token_ids
        )
        content, calls = parse_answer(answer.text, fmt, names)
        assert content == "" and len(calls) == 1, answer.text
        assert calls[0].name == (name or calls[0].name) and isinstance(json.loads(calls[0].arguments), dict)


@pytest.mark.slow
def test_a_constrained_pass_reads_the_tree_and_each_draft_forwards_nodes_once(spelling_pair):
    """The host cost of a grammar, counted as a GPU would pay it: the pass's one read, plus one read of the
    tree (its masks) and one per draft forward (the expanded nodes' masks); nothing inside a draft forward."""
    from core.bench.pass_trace import PassTrace, traced_stream

    target, draft, prompt = spelling_pair
    totals = PassTrace()
    controls = OutputControls(_constraint(spelling_pair, GrammarSpec("json_schema", json.dumps(PERSON))))
    settings = DecodingSettings(method="specexec", tree=TreeSettings(16, 6, 8, adaptive_depth=False), max_new_tokens=12)
    list(
        traced_stream(target.lm, draft.lm, target.tokenizer, prompt, SamplingParams(seed=1), settings, totals, controls)
    )
    counts = totals.counts
    assert totals.passes >= 1 and counts.draft_syncs == 0
    assert counts.sync_count == totals.passes * 2 + counts.draft_forwards, counts.syncs


@pytest.mark.slow
def test_a_grammar_the_engine_cannot_use_is_a_clear_error(spelling_pair):
    target = spelling_pair[0]
    with pytest.raises(InvalidSettingError, match="the JSON schema cannot be used"):
        GrammarSpec("json_schema", "{not json").grammar()
    with pytest.raises(InvalidSettingError, match="the grammar cannot be used"):
        GrammarConstraint(
            GrammarSpec("lark", "start: undefined_rule"),
            target.tokenizer,
            target.lm.vocab_size,
            target.lm.eos_token_ids,
        )


# -- log-probabilities ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(
            temperature=0.8,
            top_p=0.9,
            top_k=20,
            repetition_penalty=1.2,
            presence_penalty=0.5,
            frequency_penalty=0.3,
            seed=7,
        ),
        SamplingParams(temperature=0.0),
    ],
    ids=["sampled", "greedy"],
)
def test_logprobs_are_the_models_own_in_specexec_and_sequential(tiny_target, tiny_draft, params):
    """float64 tiny pair: SpecExec's log-probabilities (from its verification walk, no extra pass) equal
    sequential decoding's, and both equal log_softmax of the target's raw logits recomputed here (vLLM's and
    llama.cpp's default: before penalties, temperature, top-k and top-p), so the alternatives top-p would cut
    still have their real values (never -9999), and the sampled token never reads 0.0 for having been alone
    in the nucleus."""
    from conftest import make_word_tokenizer

    tokenizer = make_word_tokenizer()
    prompt = [1, 17, 5, 33, 9]
    runs = {}
    for method in ("sequential", "specexec"):
        settings = DecodingSettings(method=method, tree=TreeSettings(16, 6, 4), max_new_tokens=24)
        chunks = list(
            stream_generate(
                tiny_target,
                tiny_draft if method == "specexec" else None,
                tokenizer,
                prompt,
                params,
                settings,
                controls=OutputControls(top_logprobs=3),
            )
        )
        runs[method] = ([t for c in chunks for t in c.token_ids], [e for c in chunks for e in c.logprobs])
    (tokens, logprobs), (spec_tokens, spec_logprobs) = runs["sequential"], runs["specexec"]
    assert spec_tokens == tokens and len(spec_logprobs) == len(logprobs) == len(tokens) >= 5
    for ours, theirs in zip(spec_logprobs, logprobs):
        assert ours.logprob == pytest.approx(theirs.logprob, abs=1e-12)
        assert [i for i, _ in ours.top] == [i for i, _ in theirs.top]
    # recomputed from the target's own logits, one position at a time
    context = list(prompt)
    for token, entry in zip(tokens, logprobs):
        with torch.no_grad():
            logits = tiny_target.model(torch.tensor([context])).logits[0, -1]
        expected = torch.log_softmax(logits.double(), -1)
        assert entry.logprob == pytest.approx(float(expected[token]), abs=1e-9)
        assert [i for i, _ in entry.top] == expected.topk(3).indices.tolist()
        assert entry.top[0][1] == pytest.approx(float(expected.max()), abs=1e-9)
        assert all(value > -100 for _, value in entry.top) and entry.logprob < 0
        context.append(token)
    if params.greedy:  # without penalties the chosen token is the model's best
        assert all(entry.top[0][0] == token for token, entry in zip(tokens, logprobs))


def test_specinfer_refuses_what_it_cannot_give(tiny_target, tiny_draft):
    from conftest import make_word_tokenizer

    settings = DecodingSettings(method="specinfer", tree=TreeSettings(16, 4, 4), max_new_tokens=4)
    with pytest.raises(InvalidSettingError, match="not SpecInfer"):
        generate(
            tiny_target,
            tiny_draft,
            make_word_tokenizer(),
            [1, 5],
            SamplingParams(),
            settings,
            controls=OutputControls(top_logprobs=1),
        )


@pytest.mark.slow
def test_generate_command_decodes_under_a_schema_and_reports_logprobs(tmp_path, capsys):
    from core.cli.main import main

    schema = tmp_path / "answer.json"
    schema.write_text(
        json.dumps(
            {
                "type": "object",
                "properties": {"ok": {"type": "boolean"}},
                "required": ["ok"],
                "additionalProperties": False,
            }
        )
    )
    assert (
        main(
            [
                "generate",
                "--prompt",
                "Is the sky blue? Answer in JSON.",
                "--chat",
                "--json-schema",
                str(schema),
                "--logprobs",
                "2",
                "--json",
                "--threads",
                "1",
                "--max-new-tokens",
                "20",
                "--seed",
                "3",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    assert isinstance(json.loads(out["text"])["ok"], bool) and out["finish_reason"] == "eos"
    assert len(out["logprobs"]) == len(out["token_ids"]) and all(len(e["top"]) == 2 for e in out["logprobs"])
    assert min(value for e in out["logprobs"] for _, value in e["top"]) >= -9999.0  # JSON has no -inf
    assert main(["generate", "--prompt", "x", "--logprobs", "2"]) == 2
    assert "--logprobs N needs --json" in capsys.readouterr().err
