"""The `specexec` command line: same tokens across methods on the built-in pair, clear errors for bad input."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from conftest import make_word_tokenizer, run_cli


def save_tiny_model(folder: Path, seed: int = 0, context: int = 64, tokenizer_vocab: int = 64) -> Path:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=context,
        bos_token_id=1,
        eos_token_id=0,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    make_word_tokenizer(tokenizer_vocab).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("cli-models")
    return save_tiny_model(root / "target", seed=0), save_tiny_model(root / "draft", seed=1)


def assert_clear_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert any(line.startswith("error: ") for line in result.stderr.splitlines())
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def test_generate_json_contract_on_tiny_models(tiny_pair, capsys):
    target, draft = map(str, tiny_pair)
    outputs = {}
    for method in ("specexec", "sequential", "specinfer"):
        result = run_cli(
            capsys,
            "generate",
            "--target",
            target,
            "--draft",
            draft,
            "--prompt",
            "w5 w6 w7",
            "--method",
            method,
            "--temperature",
            "0.8",
            "--seed",
            "3",
            "--max-new-tokens",
            "12",
            "--budget",
            "8",
            "--json",
        )
        assert result.returncode == 0, result.stderr
        outputs[method] = json.loads(result.stdout)
    for output in outputs.values():
        assert set(output) == {"text", "token_ids", "finish_reason", "target_passes", "tokens_per_pass", "seconds"}
        assert output["finish_reason"] in ("eos", "length")
        assert len(output["token_ids"]) <= 12
    assert outputs["specexec"]["token_ids"] == outputs["sequential"]["token_ids"]
    assert outputs["specexec"]["text"] == outputs["sequential"]["text"]


def test_generate_reads_the_prompt_from_stdin_with_prompt_dash(tiny_pair, capsys):
    """`cat notes.txt | specexec generate --prompt -`: the same answer as the prompt given on the command line
    (the piped file's last line end is not part of it); an empty stdin is said before anything loads."""
    target, draft = map(str, tiny_pair)
    common = ("generate", "--target", target, "--draft", draft, "--max-new-tokens", "6", "--temperature", "0")
    given = run_cli(capsys, *common, "--prompt", "w5 w6 w7", "--json")
    piped = run_cli(capsys, *common, "--prompt", "-", "--json", stdin="w5 w6 w7\n")
    assert given.returncode == piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["token_ids"] == json.loads(given.stdout)["token_ids"]
    assert "Type the prompt" not in piped.stderr  # a pipe is not asked
    assert_clear_error(run_cli(capsys, *common, "--prompt", "-", stdin=""), "stdin held no text")


def test_bench_acceptance_json_rows_baseline_and_plot(tiny_pair, tmp_path, capsys):
    target, draft = map(str, tiny_pair)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        json.dumps({"text": "w5 w6 w7"})
        + "\n"
        + json.dumps({"messages": [{"role": "user", "content": "w8 w9"}]})
        + "\n"
        + json.dumps({"text": "not used: past --limit"})
        + "\n"
    )
    plot = tmp_path / "rates.png"
    result = run_cli(
        capsys,
        "bench",
        "acceptance",
        "--target",
        target,
        "--draft",
        draft,
        "--prompts",
        str(prompts),
        "--limit",
        "2",
        "--budgets",
        "4,16",
        "--methods",
        "specexec,specinfer",
        "--baseline",
        "--max-new-tokens",
        "6",
        "--seeds",
        "2",
        "--json",
        "--plot",
        str(plot),
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["rows"]
    assert [(r["method"], r["budget"]) for r in rows] == [
        ("sequential", 0),
        ("specexec", 4),
        ("specexec", 16),
        ("specinfer", 4),
        ("specinfer", 16),
    ]
    for row in rows:
        assert {"method", "budget", "tokens_per_pass", "draft_s", "target_s", "tokens_per_s"} <= set(row)
        assert row["tokens_per_pass"] >= 1 and row["tokens_per_s"] > 0 and row["speedup"] > 0
    assert rows[0]["tokens_per_pass"] == 1 and rows[0]["draft_s"] == 0 and rows[0]["speedup"] == 1
    assert rows[0]["draft_forwards"] == 0 and all(r["draft_forwards"] > 0 for r in rows[1:3])
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_model(tmp_path, capsys):
    result = run_cli(capsys, "generate", "--target", str(tmp_path / "nope"), "--prompt", "hi", "--method", "sequential")
    assert_clear_error(result, "nope")


def test_a_missing_model_is_said_before_the_other_one_loads(tmp_path, tiny_pair, capsys):
    """The built-in draft takes seconds to load and quantise: a missing target is said first, alone."""
    result = run_cli(
        capsys, "generate", "--target", str(tmp_path / "nope"), "--draft", "builtin-draft", "--prompt", "hi"
    )
    assert_clear_error(result, "nope")
    assert result.stderr.strip().splitlines() == [
        line for line in result.stderr.strip().splitlines() if line.startswith("error: ")
    ]  # no loading progress at all
    result = run_cli(
        capsys, "generate", "--target", str(tiny_pair[0]), "--draft", str(tmp_path / "gone"), "--prompt", "hi"
    )
    assert_clear_error(result, "gone")
    assert len(result.stderr.strip().splitlines()) == 1


def test_flags_and_files_are_checked_before_any_model_loads(tmp_path, capsys):
    """A context length or answer length below the minimum, an empty prompt, a schema or prompt file that is
    missing or not JSON: each is said at once, not after the minutes a 70B model takes to load (the target here
    does not exist, so an error that came after the load would name it instead)."""
    nowhere = str(tmp_path / "no-model")
    result = run_cli(capsys, "generate", "--target", nowhere, "--prompt", "hi", "--context-length", "3")
    assert result.returncode == 2 and "no-model" not in result.stderr
    assert "argument --context-length: the context length must be at least 64 tokens, got 3" in result.stderr
    for command in (["generate", "--prompt", "hi"], ["serve"], ["chat"]):  # serve: its requests' default
        result = run_cli(capsys, *command, "--target", nowhere, "--max-new-tokens", "0")
        assert result.returncode == 2 and "argument --max-new-tokens: max new tokens must be at least 1, got 0" in (
            result.stderr
        )
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"text": "hi"}\n')
    for command in (
        ["generate", "--prompt", "hi", "--budget", "1000000000"],
        ["serve", "--budget", "1000000000"],
        ["chat", "--budget", "1000000000"],
        ["bench", "acceptance", "--prompts", str(prompts), "--budgets", "64,10000"],  # argparse's usage error
    ):  # a tree of a billion tokens asked for terabytes of cache, and only after the load
        result = run_cli(capsys, *command, "--target", nowhere)
        assert result.returncode == 2 and "budget must be at most 8,192 draft tokens per pass" in result.stderr
        assert "no-model" not in result.stderr and "Traceback" not in result.stderr
    not_json = tmp_path / "schema.json"
    not_json.write_text("{")
    not_text = tmp_path / "schema.bin"
    not_text.write_bytes(b'{"description": "caf\xe9"}')  # Windows' "ANSI" (UTF-16's mark is read: test_text_files)
    for schema, words in (
        (str(tmp_path / "gone.json"), "cannot read the JSON schema file"),
        ('{"type": "object"}', "save the schema to a file"),
        (str(not_json), "the JSON schema cannot be used"),
        (str(not_text), "is not UTF-8 text"),
    ):
        result = run_cli(capsys, "generate", "--target", nowhere, "--prompt", "hi", "--json-schema", schema)
        assert_clear_error(result, words)
        assert "no-model" not in result.stderr
    result = run_cli(capsys, "generate", "--target", nowhere, "--prompt", "")
    assert_clear_error(result, "the prompt is empty")
    assert "no-model" not in result.stderr
    result = run_cli(capsys, "bench", "acceptance", "--target", nowhere, "--prompts", str(tmp_path / "gone.jsonl"))
    assert_clear_error(result, "prompt file not found")
    assert "no-model" not in result.stderr


def test_help_names_every_benchmark(capsys, monkeypatch):
    from core.cli.bench import BENCHMARKS

    monkeypatch.setenv("COLUMNS", "400")  # one line per command
    result = run_cli(capsys, "--help")
    bench_line = next(line for line in result.stdout.splitlines() if line.strip().startswith("bench "))
    assert len(BENCHMARKS) >= 9 and all(name in bench_line for name in BENCHMARKS)


def test_budget_below_one(capsys):
    assert_clear_error(run_cli(capsys, "generate", "--prompt", "hi", "--budget", "0"), "budget")


def test_prompt_longer_than_context(tiny_pair, tmp_path, capsys):
    target, draft = map(str, tiny_pair)
    prompt = " ".join(["w5"] * 80)
    result = run_cli(capsys, "generate", "--target", target, "--draft", draft, "--prompt", prompt)
    assert_clear_error(result, "context window is 64")
    assert "--context-length" not in result.stderr  # 64 is all these models keep: only shortening helps
    longer = str(save_tiny_model(tmp_path / "longer", context=256))  # one that keeps more: the length that holds it
    flags = ("--method", "sequential", "--context-length", "64", "--max-new-tokens", "8")
    result = run_cli(capsys, "generate", "--target", longer, *flags, "--prompt", prompt)
    assert_clear_error(
        result, "context window is 64", "(these models keep up to 256 tokens: --context-length 256 holds it)"
    )


def test_a_prompt_that_is_not_all_text_is_read_with_the_mark_for_what_is_not(tiny_pair, tmp_path, capsys):
    """A command line's byte that is not UTF-8 reaches Python as a lone surrogate ("\\udcff"), as does a JSON
    escape ("\\ud800") in a messages file: no tokenizer reads one (a TypeError traceback); it is read as U+FFFD."""
    from core.text.prompts import readable_text

    assert readable_text("w5 \udcff w6 \ud83d\ude00 \U0001f600") == "w5 \ufffd w6 \ufffd\ufffd \U0001f600"
    target, draft = map(str, tiny_pair)
    common = ("--target", target, "--draft", draft, "--max-new-tokens", "3", "--json")
    result = run_cli(capsys, "generate", *common, "--prompt", "w5 \udcff w6")
    assert result.returncode == 0, result.stderr
    messages = tmp_path / "messages.jsonl"
    messages.write_text('{"role": "user", "content": "w5 \\ud800 w6"}\n', encoding="utf-8")
    result = run_cli(capsys, "generate", *common, "--messages-file", str(messages))
    assert result.returncode == 0, result.stderr


def test_tokenizer_mismatch(tmp_path, tiny_pair, capsys):
    target = str(tiny_pair[0])
    other = save_tiny_model(tmp_path / "other", tokenizer_vocab=60)
    result = run_cli(capsys, "generate", "--target", target, "--draft", str(other), "--prompt", "w5")
    assert_clear_error(result, "tokenizer")


def test_unsupported_architecture(tmp_path, capsys):
    folder = tmp_path / "gpt2"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}))
    result = run_cli(capsys, "generate", "--target", str(folder), "--prompt", "hi", "--method", "sequential")
    assert_clear_error(result, "gpt2", "cannot run")


@pytest.mark.slow
def test_builtin_pair_specexec_equals_sequential(capsys):
    """The product's promise on the real built-in pair: same seed, same tokens, at temperature 0.7 (in this
    process: the command's output is under test, not a process boundary; the pair is freed when it returns)."""
    outputs = {}
    for method in ("specexec", "sequential"):
        result = run_cli(
            capsys,
            "generate",
            "--target",
            "builtin",
            "--draft",
            "builtin-draft",
            "--prompt",
            "Name three colours.",
            "--chat",
            "--method",
            method,
            "--temperature",
            "0.7",
            "--seed",
            "11",
            "--max-new-tokens",
            "24",
            "--budget",
            "32",
            "--json",
        )
        assert result.returncode == 0, result.stderr
        outputs[method] = json.loads(result.stdout)
    assert outputs["specexec"]["token_ids"] == outputs["sequential"]["token_ids"]
    assert len(outputs["specexec"]["token_ids"]) > 0
    assert outputs["specexec"]["target_passes"] < outputs["sequential"]["target_passes"]
