"""The automatic method and budget (core/decoding/autotune): convergence on synthetic machines, exact tokens across
switches, the cost model's cache, and the settings plumbing (CLI flags, engine events)."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

from conftest import in_process_engine, make_word_tokenizer, torch_threads
from core.engine import protocol as P
from core.decoding.autotune.acceptance import BUILTIN_TABLE, DEFAULT_TABLE, prior_table
from core.decoding.autotune.chooser import (
    SEQUENTIAL,
    SPECEXEC,
    AutoTuner,
    Choice,
    Config,
    candidate_configs,
)
from core.planning.budgets import AUTO_MAX_BUDGET
from core.decoding.autotune.cost_model import CostModel, Curve, cached_cost_model, cost_key, measure_cost_model
from core.models.speed import MEASURED_OVERLAP, OverlapPrice
from core.decoding.generation import generate, stream_generate
from core.decoding.settings import DecodingSettings, SamplingParams, TreeSettings, resolve_budget

# ----------------------------------------------------------------------------------------------------------
# Synthetic machines


def cpu_like() -> CostModel:
    """Compute-bound: every token of a forward costs; the draft is as big as the target (the built-in pair)."""
    sizes = (1, 16, 64, 256, 1024)
    return CostModel(
        target_pass=Curve(tuple((n, 0.05 + 0.0016 * n) for n in sizes)),
        draft_forward=Curve(tuple((b, 0.04 + 0.0015 * b) for b in (1, 8, 32, 64))),
        sequential_step=0.052,
    )


def offloaded_gpu_like() -> CostModel:
    """A streamed 70B target: 2 s per pass whatever the tree up to 256 tokens, then compute shows; a small
    draft resident on the GPU."""
    sizes = (1, 16, 64, 256, 512, 1024)
    return CostModel(
        target_pass=Curve(tuple((n, 2.0 + 0.004 * max(0, n - 257)) for n in sizes)),
        draft_forward=Curve(tuple((b, 0.008 + 0.00002 * b) for b in (1, 8, 32, 64))),
        sequential_step=2.0,
    )


def scaled(cost: CostModel, factor: float) -> CostModel:
    """The same machine measured while something else ran: every time `factor` times longer."""

    def curve(c):
        return Curve(tuple((n, t * factor) for n, t in c.points))

    return CostModel(curve(cost.target_pass), curve(cost.draft_forward), cost.sequential_step * factor)


class Machine:
    """The truth a tuner is run against: mean seconds per pass of each configuration (the structure of the
    true cost model), mean tokens per pass from an acceptance function, and log-normal timing noise."""

    def __init__(self, cost: CostModel, acceptance, noise: float, seed: int = 0) -> None:
        self.model = AutoTuner(cost, BUILTIN_TABLE)
        self.acceptance = acceptance
        self.noise = noise
        self.random = np.random.default_rng(seed)

    def mean_tokens(self, config: Config) -> float:
        return 1.0 if config.method == SEQUENTIAL else self.acceptance(config.budget)

    def rate(self, config: Config) -> float:
        return self.mean_tokens(config) / self.model.model_seconds(config)

    def run(self, config: Config) -> tuple[int, float]:
        mean = self.mean_tokens(config)
        tokens = 1 if config.method == SEQUENTIAL else 1 + int(self.random.poisson(mean - 1.0))
        seconds = self.model.model_seconds(config) * math.exp(self.random.normal(0.0, self.noise))
        return tokens, seconds


def drive(tuner: AutoTuner, machine: Machine, candidates: list[Config], answers: int, passes: int) -> list[Config]:
    """Answers of `passes` passes each, as the engine runs them; the config of every pass."""
    used = []
    for _ in range(answers):
        tuner.begin(candidates)
        for index in range(passes):
            config = tuner.choose().config
            tokens, seconds = machine.run(config)
            tuner.observe(config, tokens, seconds, timed=index > 0)
            used.append(config)
    return used


def switches(used: list[Config]) -> int:
    return sum(a != b for a, b in zip(used, used[1:]))


ALL = candidate_configs("auto", None, 32, AUTO_MAX_BUDGET, has_draft=True)


def test_cpu_like_machine_stays_on_plain_decoding():
    machine = Machine(cpu_like(), BUILTIN_TABLE.tokens, noise=0.25)
    best = max(ALL, key=machine.rate)
    assert best == Config(SEQUENTIAL)
    tuner = AutoTuner(cpu_like(), BUILTIN_TABLE)
    used = drive(tuner, machine, ALL, answers=8, passes=50)
    assert set(used) == {Config(SEQUENTIAL)}
    assert tuner.current.reason.startswith("plain decoding: on this CPU a speculative pass costs more than it saves")


def test_offloaded_gpu_converges_to_the_best_tree_and_stays():
    # the pair accepts 15% less than its table, and the cost model was measured 30% slow on a busy machine
    machine = Machine(offloaded_gpu_like(), lambda k: 0.85 * BUILTIN_TABLE.tokens(k), noise=0.2, seed=1)
    best = max(ALL, key=machine.rate)
    assert best.method == SPECEXEC and best.budget == 256  # the knee of the flat-then-rising curve
    tuner = AutoTuner(scaled(offloaded_gpu_like(), 1.3), BUILTIN_TABLE, device_kind="GPU")
    used = drive(tuner, machine, ALL, answers=10, passes=40)
    settled = used[40:]
    assert switches(settled) == 0, "the choice flapped under timing noise"
    final = settled[-1]
    assert (final.method, final.budget) == (best.method, best.budget)
    assert machine.rate(final) >= 0.98 * machine.rate(best)  # expansion widths that cost the same may tie
    reason = tuner.current.reason
    assert reason.startswith("SpecExec, 256-token trees: ~") and "pass" in reason and "x plain decoding" in reason
    tokens, seconds = tuner.estimate(final)  # learned: close to the truth, not to the slow measurement
    assert tokens == pytest.approx(machine.mean_tokens(final), rel=0.15)
    assert seconds == pytest.approx(machine.model.model_seconds(final), rel=0.15)


def test_a_draft_that_accepts_little_is_dropped_for_plain_decoding():
    """A useless draft (every pass delivers one token) that costs a fifth of the target per pass."""
    cost = offloaded_gpu_like()
    cost = CostModel(cost.target_pass, Curve(tuple((b, 0.03) for b in (1, 64))), cost.sequential_step)
    machine = Machine(cost, lambda k: 1.0, noise=0.2, seed=2)
    assert max(ALL, key=machine.rate) == Config(SEQUENTIAL)
    tuner = AutoTuner(cost, BUILTIN_TABLE, device_kind="GPU")
    used = drive(tuner, machine, ALL, answers=6, passes=40)
    assert used[0].method == SPECEXEC  # the table promised speed-up at first
    assert set(used[40:]) == {Config(SEQUENTIAL)}


def test_near_equal_choices_do_not_flap():
    """Plain decoding and one tree within 4% of each other, 30% timing noise: at most one switch."""
    cost = offloaded_gpu_like()
    pair = [Config(SEQUENTIAL), Config(SPECEXEC, 16, 16)]
    tree_seconds = AutoTuner(cost, BUILTIN_TABLE).model_seconds(pair[1])
    accepts = 1.04 * tree_seconds / cost.sequential_step
    machine = Machine(cost, lambda k: accepts, noise=0.3, seed=3)
    tuner = AutoTuner(cost, BUILTIN_TABLE)
    used = drive(tuner, machine, pair, answers=10, passes=40)
    assert switches(used) <= 1


def test_candidates_and_budget_resolution():
    assert candidate_configs("sequential", None, 32, 1024, True) == [Config(SEQUENTIAL)]
    assert candidate_configs("auto", 64, 8, 1024, True) == [Config(SEQUENTIAL), Config(SPECEXEC, 64, 8)]
    assert candidate_configs("auto", None, 32, 1024, has_draft=False) == [Config(SEQUENTIAL)]
    tuned = candidate_configs("specexec", None, 32, 64, True)
    assert Config(SEQUENTIAL) not in tuned and {c.budget for c in tuned} == {16, 32, 64}
    assert all(c.expand <= c.budget for c in tuned)
    assert resolve_budget("auto", "auto") == (AUTO_MAX_BUDGET, True)
    assert resolve_budget("auto", "specinfer") == (128, False)
    assert resolve_budget(48, "auto") == (48, False)
    assert prior_table("builtin", "builtin-draft") is BUILTIN_TABLE and prior_table("a", "b") is DEFAULT_TABLE


def test_no_draft_gives_plain_decoding_with_its_reason():
    tuner = AutoTuner(cpu_like(), DEFAULT_TABLE)
    tuner.begin(candidate_configs("auto", None, 32, 1024, has_draft=False))
    assert tuner.choose().reason == "plain decoding: no draft model is loaded"


def test_curve_interpolates_and_extrapolates():
    curve = Curve(((1, 1.0), (3, 2.0), (5, 6.0)))
    assert (curve(0), curve(2), curve(4), curve(7)) == (1.0, 1.5, 4.0, 10.0)
    assert Curve(((1, 2.0), (9, 1.0)))(20) == 1.0  # never falls beyond the last point


# ----------------------------------------------------------------------------------------------------------
# Exact tokens across method switches (float64 tiny models)


class ScriptedTuner(AutoTuner):
    """Follows a fixed schedule of configurations, pass by pass, to force switches at chosen places."""

    def __init__(self, schedule: list[Config]) -> None:
        super().__init__(cpu_like(), BUILTIN_TABLE)
        self.schedule = schedule
        self.passes = 0

    def choose(self) -> Choice:
        config = self.schedule[self.passes % len(self.schedule)]
        self._current = Choice(config, 1.0, 1.0, "scripted")
        return self._current

    def observe(self, config, tokens, seconds, timed=True) -> None:
        self.passes += 1
        super().observe(config, tokens, seconds, timed)


SCHEDULE = [
    Config(SEQUENTIAL),
    Config(SPECEXEC, 8, 4),
    Config(SEQUENTIAL),
    Config(SEQUENTIAL),
    Config(SPECEXEC, 32, 8),
    Config(SPECEXEC, 4, 2),
    Config(SEQUENTIAL),
]


@pytest.mark.parametrize(
    "sampling",
    [
        dict(temperature=0.9, seed=5),
        dict(temperature=0.0),
        dict(temperature=0.7, top_p=0.9, repetition_penalty=1.3, seed=6),
    ],
)
def test_switching_methods_mid_answer_keeps_the_sequential_tokens(tiny_target, tiny_draft, sampling):
    tokenizer = make_word_tokenizer()
    params = SamplingParams(**sampling)
    prompt = [1, 9, 17, 23, 5]
    with torch_threads(1):
        plain = generate(
            tiny_target, None, tokenizer, prompt, params, DecodingSettings(method="sequential", max_new_tokens=60)
        )
        tuner = ScriptedTuner(SCHEDULE)
        chunks = list(
            stream_generate(
                tiny_target,
                tiny_draft,
                tokenizer,
                prompt,
                params,
                DecodingSettings(
                    method="auto", auto_budget=True, tree=TreeSettings(budget=64, max_depth=8), max_new_tokens=60
                ),
                tuner=tuner,
            )
        )
    tokens = [t for c in chunks for t in c.token_ids]
    assert tokens == plain.token_ids
    methods = [c.choice.config.method for c in chunks]
    assert SEQUENTIAL in methods and SPECEXEC in methods and len(chunks) < len(tokens)
    # a SpecExec pass drafts unless it has a single token left to emit (then it is a plain target step)
    assert all((c.stats.tree_size == 0) == (c.choice.config.method == SEQUENTIAL) for c in chunks[:-1])


def test_real_tuner_gives_the_sequential_tokens(tiny_target, tiny_draft, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECEXEC_CACHE_DIR", str(tmp_path))
    tokenizer = make_word_tokenizer()
    params = SamplingParams(temperature=0.8, seed=11)
    with torch_threads(1):
        plain = generate(
            tiny_target, None, tokenizer, [1, 5, 6], params, DecodingSettings(method="sequential", max_new_tokens=40)
        )
        auto = generate(
            tiny_target,
            tiny_draft,
            tokenizer,
            [1, 5, 6],
            params,
            DecodingSettings(method="auto", auto_budget=True, max_new_tokens=40),
        )
    assert auto.token_ids == plain.token_ids
    assert (tmp_path / "autotune" / "cost-models.json").is_file()


def test_the_tuner_keeps_its_expected_speed_for_predictions(tiny_target, tiny_draft, tmp_path, monkeypatch):
    """What `models recommend` and the wizard show for a pair loaded here: the speed of the tuner's own first
    choice, from this machine's timings (core.models.measured, which needs no torch to read)."""
    from core.decoding.autotune.setup import tuner_for_pair
    from core.models.measured import measured_speed

    monkeypatch.setenv("SPECEXEC_CACHE_DIR", str(tmp_path))
    with torch_threads(1):
        tuner = tuner_for_pair(tiny_target, tiny_draft)
    tuner.begin(candidate_configs("auto", None, 16, tiny_target.max_tree_tokens or 256, True))
    first = tuner.choose()
    kept = measured_speed(tiny_target.name, tiny_draft.name, "CPU")
    assert kept is not None and kept.method == first.config.method and kept.budget == first.config.budget
    assert kept.tokens_per_second == pytest.approx(first.tokens_per_second)
    assert (
        measured_speed(tiny_target.name, None, "CPU") is None
        and measured_speed(tiny_target.name, tiny_draft.name, "GPU") is None
    )


@pytest.mark.parametrize(
    "speed",
    ["fast", float("inf"), float("nan"), 10**400, -3.0, None],
    ids=["text", "inf", "nan", "huge", "negative", "null"],
)
def test_a_kept_speed_that_is_not_a_speed_reads_as_none(speed, tmp_path):
    """The speeds file edited by hand or by another program: a figure that is not a positive finite number
    is no figure (the prediction stands), never an error in the wizard or `models recommend`."""
    from core.models.measured import MeasuredSpeed, measured_speed, record_speed

    path = tmp_path / "speeds.json"
    record_speed("t", "d", "CPU", MeasuredSpeed(6.5, "specexec", 64, time.time()), path)
    assert measured_speed("t", "d", "CPU", path).tokens_per_second == 6.5
    entries = json.loads(path.read_text())
    (key,) = entries
    path.write_text(json.dumps({key: {**entries[key], "tokens_per_second": speed}}))
    assert measured_speed("t", "d", "CPU", path) is None


def test_the_budget_choice_follows_the_overlap():
    """Drafting that costs a fifth of the target's pass per forward: on the critical path, small trees win;
    with a price that takes most of the search off it (the shadow fits the 1 s pass), a larger tree wins.
    The measured price (no forward spared) chooses as without the overlap."""
    cost = CostModel(
        target_pass=Curve(tuple((n, 1.0) for n in (1, 16, 64, 256, 1024))),
        draft_forward=Curve(tuple((b, 0.2) for b in (1, 8, 32, 64))),
        sequential_step=1.0,
    )
    trees = candidate_configs(SPECEXEC, None, 32, AUTO_MAX_BUDGET, has_draft=True)
    without = AutoTuner(cost, BUILTIN_TABLE, "GPU")
    overlapped = AutoTuner(cost, BUILTIN_TABLE, "GPU", overlap=OverlapPrice.flat(1.0, 0.8))
    measured = AutoTuner(cost, BUILTIN_TABLE, "GPU", overlap=MEASURED_OVERLAP)
    chosen, chosen_overlapped = max(trees, key=without.rate), max(trees, key=overlapped.rate)
    assert chosen.budget == 16 and chosen_overlapped.budget == 64
    config = Config(SPECEXEC, 64, 64)
    assert overlapped.model_seconds(config) < without.model_seconds(config)
    # the target's pass is never hidden, and the catch-up forward stays: at least that much remains
    assert overlapped.model_seconds(config) >= cost.target_pass(65) + cost.draft_forward(BUILTIN_TABLE.tokens(64))
    assert max(trees, key=measured.rate) == chosen
    assert measured.model_seconds(config) == pytest.approx(
        without.model_seconds(config) * (1 - math.prod(MEASURED_OVERLAP.at(64))), rel=0.2
    )


def test_the_engine_prices_the_overlap_where_it_runs_it(tiny_target, tiny_draft, tmp_path, monkeypatch):
    """tuner_for_pair prices the overlap where the engine runs it (a CUDA draft, or SPECEXEC_OVERLAP=1), not
    on a CPU by default, where the shadow would run in sequence."""
    from core.decoding.autotune.setup import tuner_for_pair

    monkeypatch.setenv("SPECEXEC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SPECEXEC_OVERLAP", raising=False)
    with torch_threads(1):
        assert tuner_for_pair(tiny_target, tiny_draft).overlap is None
        monkeypatch.setenv("SPECEXEC_OVERLAP", "1")
        assert tuner_for_pair(tiny_target, tiny_draft).overlap is MEASURED_OVERLAP
        assert tuner_for_pair(tiny_target, None).overlap is None


# ----------------------------------------------------------------------------------------------------------
# Cost model measurement and cache


def test_cost_model_is_measured_once_and_cached_per_pair(tiny_target, tiny_draft, tmp_path):
    path = tmp_path / "cost.json"
    with torch_threads(1):
        first, measured = cached_cost_model(tiny_target, tiny_draft, time_limit=0.3, path=path, now=1000.0)
        again, measured_again = cached_cost_model(tiny_target, tiny_draft, time_limit=0.3, path=path, now=2000.0)
        alone, measured_alone = cached_cost_model(tiny_target, None, time_limit=0.3, path=path, now=2000.0)
        stale, measured_stale = cached_cost_model(
            tiny_target, tiny_draft, time_limit=0.3, path=path, now=1000.0 + 40 * 86400
        )
    assert (measured, measured_again, measured_alone, measured_stale) == (True, False, True, True)
    assert again == first and alone.draft_forward is None
    assert len(first.target_pass.points) >= 2 and len(first.draft_forward.points) >= 2
    assert all(t > 0 for _, t in first.target_pass.points) and first.sequential_step > 0
    assert cost_key(tiny_target, tiny_draft) != cost_key(tiny_target, None)
    assert len(json.loads(path.read_text())) == 2


def test_every_size_is_warmed_up_and_the_draft_timed_through_the_search_forward(tiny_target, tiny_draft, monkeypatch):
    """Issue 31: a first call of a size compiles Triton kernels (and captures a graph on CUDA), so it is never
    timed; the draft's figure is the search forward the engine runs (windowed, bucketed columns)."""
    import core.decoding.captured_forward as captured_forward

    widths: list[int] = []
    real = captured_forward.run_draft_forward
    monkeypatch.setattr(
        captured_forward,
        "run_draft_forward",
        lambda draft, cache, ids, *rest: widths.append(ids.shape[0]) or real(draft, cache, ids, *rest),
    )
    forwards: list[int] = []
    forward = tiny_target.forward
    monkeypatch.setattr(
        tiny_target, "forward", lambda ids, *rest, **kw: forwards.append(ids.shape[0]) or forward(ids, *rest, **kw)
    )
    with torch_threads(1):
        model = measure_cost_model(tiny_target, tiny_draft, time_limit=30.0, max_tree_tokens=64)
    timed_widths = [width for width, _ in model.draft_forward.points]
    assert timed_widths == sorted({1, 8, 32, 64})
    for width in timed_widths:  # one untimed call, then 2 (small) or 1 timed
        assert widths.count(width) == 1 + (2 if width <= 16 else 1)
    for size in (1, 16, 64):  # the target's sizes: the same warm-up (size 1 also by the plain step: 1 + 3 more)
        assert forwards.count(size) >= 1 + (2 if size <= 16 else 1)


KEPT = {"target_pass": {"points": [[1, 0.01], [16, 0.02]]}, "sequential_step": 0.01}


@pytest.mark.parametrize(
    "entry",
    [
        None,  # not JSON at all
        {"measured_at": "yesterday", "model": KEPT},
        {"measured_at": 10**400, "model": KEPT},
        {"model": KEPT},
        {"measured_at": 0, "model": ["a list"]},
        {"measured_at": 0, "model": {**KEPT, "sequential_step": float("nan")}},
        {"measured_at": 0, "model": {**KEPT, "target_pass": {"points": [[1, -0.01]]}}},
        {"measured_at": 0, "model": {**KEPT, "target_pass": {"points": []}}},
        {"measured_at": 0, "model": {**KEPT, "draft_forward": {"points": [[1, "fast"]]}}},
    ],
    ids=["not-json", "time-text", "time-huge", "no-time", "model-list", "nan", "negative", "no-points", "text"],
)
def test_a_damaged_cache_file_is_measured_again(tiny_target, tmp_path, entry):
    """The cache edited by hand or by another program: the pair is measured again, never a load that fails."""
    path = tmp_path / "cost.json"
    with torch_threads(1):
        key = cost_key(tiny_target, None)  # the thread count is part of the key
        path.write_text("{not json" if entry is None else json.dumps({key: entry}))
        model, measured = cached_cost_model(tiny_target, None, time_limit=0.2, path=path, now=1000.0)
    assert measured and model.sequential_step > 0
    assert json.loads(path.read_text())[key]["measured_at"] == 1000.0
    with torch_threads(1):
        assert cached_cost_model(tiny_target, None, path=path, now=1000.0) == (model, False)  # a sound entry is kept


def test_measurement_stops_near_its_time_limit(tiny_target, tiny_draft):
    import time

    with torch_threads(1):
        started = time.perf_counter()
        measure_cost_model(tiny_target, tiny_draft, time_limit=0.0)
        spent = time.perf_counter() - started
    # a zero limit still takes the two smallest sizes of each curve: a handful of tiny forwards
    assert spent < 5.0


# ----------------------------------------------------------------------------------------------------------
# The engine: automatic by default, the choice sent as an AutoChoice event


def test_engine_defaults_to_auto_and_explains_its_choice(tmp_path, monkeypatch):
    from test_engine import USER, save_tiny_pair

    from core.models.measured import measured_speed

    monkeypatch.setenv("SPECEXEC_CACHE_DIR", str(tmp_path / "cache"))

    target_dir, draft_dir = save_tiny_pair(tmp_path)
    engine, serve = in_process_engine()

    with torch_threads(1):
        loaded = serve(P.Load(target=target_dir, draft=draft_dir, dtype="float64", device="cpu", max_depth=8))
        assert "Measuring this machine's speed" in [e.stage for e in loaded if isinstance(e, P.LoadProgress)]
        assert engine.models_info["budget"] == "auto"
        pair = (engine.session.target.name, engine.session.draft.name, "CPU")
        at_load = measured_speed(*pair)  # kept at load for the predictions...
        assert at_load is not None
        got = serve(P.Generate("a", tuple(USER), max_new_tokens=24, temperature=0.8, seed=4))
        after = measured_speed(*pair)  # ...and again after an answer, from the passes it saw
        assert after is not None and after.measured_at > at_load.measured_at
        assert after.tokens_per_second == pytest.approx(
            max(
                engine.session.tuner.rate(c)
                for c in candidate_configs("auto", None, 16, 256, True)
                if c.method == after.method and c.budget == after.budget
            )
        )
        plain = serve(P.Generate("s", tuple(USER), max_new_tokens=24, temperature=0.8, seed=4, method="sequential"))
        alone = serve(P.Load(target=target_dir, draft=None, dtype="float64", device="cpu"))
        no_draft = serve(P.Generate("n", tuple(USER), max_new_tokens=4, temperature=0.8, seed=4))
    assert not [e for e in loaded + alone if isinstance(e, P.Error)]
    kinds = [type(e).__name__ for e in got]
    assert kinds.index("AutoChoice") < kinds.index("TokenChunk") and kinds[-1] == "Finished"
    choices = [e for e in got if isinstance(e, P.AutoChoice)]
    assert all(e.method in ("sequential", "specexec") and e.reason for e in choices)

    def tokens(evs):
        return [t for e in evs if isinstance(e, P.TokenChunk) for t in e.token_ids]

    assert tokens(got) == tokens(plain) and len(tokens(got)) > 0
    assert not [e for e in plain if isinstance(e, P.AutoChoice)]  # an explicit method is not tuned
    (only,) = [e for e in no_draft if isinstance(e, P.AutoChoice)]
    assert only.reason == "plain decoding: no draft model is loaded"


def test_cli_defaults_are_automatic_and_explicit_values_win():
    from core.cli.main import build_parser
    from core.cli.options import decoding_settings

    parser = build_parser()
    default = decoding_settings(parser.parse_args(["generate", "--prompt", "hi"]))
    assert (default.method, default.auto_budget, default.tree.budget, default.tuned) == (
        "auto",
        True,
        AUTO_MAX_BUDGET,
        True,
    )
    fixed = decoding_settings(
        parser.parse_args(["generate", "--prompt", "hi", "--method", "specexec", "--budget", "48"])
    )
    assert (fixed.method, fixed.auto_budget, fixed.tree.budget, fixed.tuned) == ("specexec", False, 48, False)
    plain = decoding_settings(parser.parse_args(["chat", "--method", "sequential"]))
    assert not plain.tuned
    with pytest.raises(SystemExit):
        parser.parse_args(["generate", "--prompt", "hi", "--budget", "lots"])
