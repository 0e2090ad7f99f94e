"""The prepared GPU check (scripts/gpu-check.sh): its CPU smoke run end to end, and its report's merging."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.bench.gpu_check.report import PART_TITLES, write_report

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_cpu_smoke_run_writes_every_part(tmp_path):
    """`gpu-check.sh --cpu` runs every part (each its own process, with tiny shapes) and reports each one's
    figures; a part that failed would be listed under `failed` with its error."""
    env = {**os.environ, "PYTHON": sys.executable}
    env.pop("OUT", None)
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu-check.sh"), "--cpu", "--out", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=2900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    parts = report["parts"]
    assert report["failed"] == [], {name: parts[name].get("error") for name in report["failed"]}
    assert report["machine"] == "CPU (no GPU)"
    assert parts["versions"]["packages"]["torch"]
    profile = parts["profile"]
    assert profile["plain"]["tokens"] == 4 and "aten::" in profile["plain"]["by_host_time"]
    assert profile["passes"]["passes"] == 1 and "aten::" in profile["passes"]["by_host_time"]
    assert "choice" in parts["versions"]["attention_engine"]
    for name, fix in (("token-speed-fix-off", False), ("token-speed-fix-on", True)):
        assert parts[name]["attention_fix"] is fix
        assert [w["positions"] for w in parts[name]["windows"]] == ["1-10", "40-50", "90-100"]
        assert all(w["median_ms"] > 0 for w in parts[name]["windows"])
    for name in ("passes-eager", "passes-graphs"):
        assert parts[name]["graphs"] is False  # never captured off CUDA
        assert all(r["pass_s"] > 0 and r["draft_forwards_per_pass"] >= 1 for r in parts[name]["rows"])
    steps = parts["step-graphs"]
    assert [r["graphs"] for r in steps["rows"]] == [False, True] and not any(r["captured"] for r in steps["rows"])
    assert steps["same_tokens"] and steps["captured_vs_eager_max_abs"] is None and steps["tokens"] == 40
    assert all(r["median_ms"] > 0 for r in steps["rows"])
    assert {r["rows"] for r in parts["matmul"]["rows"]} == {1, 16}
    assert all(
        r["dense16_gbps"] > 0 and any(k.endswith("_gbps") and k != "dense16_gbps" for k in r)
        for r in parts["matmul"]["rows"]
    )
    offload = parts["offload"]
    assert offload["copy_rate_gbps"] > 0
    for row in offload["rows"]:
        assert row["measured_target_s_80_layers"] > 0 and row["model_target_s_80_layers"] > 0
        assert row["prediction"]["tokens_per_second"] > 0
    shadow = parts["shadow"]  # one stream on a CPU: the shadow runs after the pass, so no share is claimed
    assert shadow["target_alone_s"] > 0 and shadow["draft_forward_s"] > 0 and shadow["shadow_forwards"] >= 1
    assert shadow["target_with_shadow_s"] > 0 and shadow["both_s"] > 0 and shadow["hidden_share"] is None
    agreement = {r["dtype"]: r for r in parts["agreement"]["rows"]}
    assert set(agreement) == {"float32", "float16", "bfloat16"}
    assert agreement["float32"]["specexec_differs"] == 0  # same seed, same tokens in float32 on the CPU
    assert parts["graph-vram"]["planned_bytes"] > 0 and parts["graph-vram"]["kept_bytes"] is None
    pinning = parts["pinning"]
    assert pinning["ring_slots"] >= 2 and pinning["pageable_bytes_per_second"] > 0
    assert pinning["ring_bytes_per_second"] > 0 and pinning["ring_share_of_pinned"] > 0  # the ring ran and was timed
    gemlite = parts["gemlite"]  # on a CPU only the conversion into its inputs is checked
    assert gemlite["conversion_max_error"] == 0 and "CUDA GPU" in gemlite["skipped"]
    summary = (tmp_path / "summary.md").read_text()
    assert all(title in summary for title in PART_TITLES.values()) and "FAILED" not in summary


def test_report_names_the_parts_that_did_not_finish(tmp_path):
    """A part killed at its limit leaves no file, a failed one its error: both are in `failed` and the summary."""
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "versions.json").write_text(
        json.dumps(
            {
                "ok": True,
                "packages": {"torch": "2.11.0"},
                "torch_cuda": "13.0",
                "cudnn": 91900,
                "gpu": {"name": "NVIDIA H100 80GB HBM3"},
            }
        )
    )
    (parts / "agreement.json").write_text(json.dumps({"ok": False, "error": "RuntimeError: CUDA error"}))
    (parts / "matmul.json").write_text(
        json.dumps({"device": "NVIDIA H100 80GB HBM3", "rows": [{"shape": "q/o", "rows": 1, "fused_gbps": 1200.0}]})
    )  # the CLI's own output: no "ok" field
    window = {"positions": "1-50", "median_ms": 31.5, "mean_ms": 32.0, "max_ms": 40.0}
    (parts / "token-speed-fix-on.json").write_text(
        json.dumps({"ok": False, "error": "killed at its time limit", "killed": True, "partial": {"windows": [window]}})
    )
    (parts / "passes-eager.json").write_text(
        json.dumps({"ok": False, "error": "killed at its time limit", "partial": {"rows": [{"budget": 64}]}})
    )  # a partial row without the figures the summary shows: named, not rendered
    steps = {"graphs": False, "captured": False, "median_ms": 9.5, "mean_ms": 9.6, "max_ms": 12.0}
    (parts / "step-graphs.json").write_text(
        json.dumps(
            {
                "ok": True,
                "same_tokens": True,
                "captured_vs_eager_max_abs": 0.0,
                "rows": [steps, {**steps, "graphs": True, "captured": True, "median_ms": 2.25}],
            }
        )
    )
    row = {"rows": 32, "bytes": 10**9, "gemlite_s": 0.001, "tinygemm_s": 0.004, "gemlite_relative_error": 0.004}
    (parts / "gemlite.json").write_text(
        json.dumps(
            {
                "ok": True,
                "conversion_max_error": 0.0,
                "rows": [{**row, "gemlite_first_call_s": 2.5}],
                "rates": {"32": {"gemlite": 1e12, "tinygemm": 5e11}},
            }
        )
    )
    report = write_report(parts, tmp_path)
    assert report["machine"] == "NVIDIA H100 80GB HBM3"
    assert "agreement" in report["failed"] and "offload" in report["failed"] and "matmul" not in report["failed"]
    summary = (tmp_path / "summary.md").read_text()
    assert "RuntimeError: CUDA error" in summary and "killed at its time limit" in summary
    assert "q/o rows 1: fused_gbps 1200 GB/s" in summary
    assert "found before it stopped:\n- positions 1-50: 31.50 ms median" in summary
    assert "(partial findings in report.json: rows)" in summary
    assert "graphs on (captured): 2.25 ms a token median" in summary and "captured step vs eager: 0 max abs" in summary
    assert json.loads((tmp_path / "report.json").read_text())["parts"]["versions"]["cudnn"] == 91900
    assert "- rows 32: gemlite 1000 GB/s against tinygemm 500 (x2.00)" in summary
    assert "largest error against the dequantised weights: 0.004; slowest first call 2.5 s" in summary


def test_gemlite_gets_the_engines_4bit_weights_and_is_rated_in_the_kernels_unit():
    """The GPTQ layout turned into gemlite's (W_q, scales, zeros) gives back the engine's own dequantisation
    (checked with gemlite's kernels by hand in Triton's interpreter too: its GEMV paths agree to fp16
    rounding); an act-order linear is refused; rates are in the unit the engine picks kernels by."""
    import torch

    from core.bench.gpu_check.gemlite_rate import _dequantised, gemlite_inputs, rates_by_rows
    from core.offload.synthetic_gptq import finalised_linear, random_gptq_tensors

    generator = torch.Generator().manual_seed(3)
    for k, n, group in ((256, 64, 128), (512, 96, 64)):
        linear = finalised_linear(random_gptq_tensors(generator, k, n, 4, group, False), k, n, 4, group, False)
        w_q, scales, zeros = gemlite_inputs(linear, torch.float32)
        assert w_q.shape == (n, k) and w_q.dtype == torch.uint8 and scales.shape == zeros.shape == (n, k // group)
        assert torch.equal(_dequantised(w_q, scales, zeros), linear.dequantize(torch.float32))
    ordered = finalised_linear(random_gptq_tensors(generator, 256, 64, 4, 128, True), 256, 64, 4, 128, True)
    with pytest.raises(ValueError, match="act-order"):
        gemlite_inputs(ordered, torch.float32)
    rows = [
        {"rows": 32, "bytes": 100, "gemlite_s": 1.0, "tinygemm_s": 1.0},
        {"rows": 32, "bytes": 300, "gemlite_s": 1.0, "tinygemm_s": 3.0},
    ]
    # 400 bytes over 2 s for gemlite; tinygemm reads them (32 + 15) / 16 times over its 4 s
    assert rates_by_rows(rows) == {"32": {"gemlite": 200.0, "tinygemm": 400 * 47 / 16 / 4}}


@pytest.mark.slow  # a part in a child process run to its limit (~13 s)
def test_a_part_killed_at_its_limit_writes_what_it_found(tmp_path):
    """`timeout`'s SIGTERM stops a part, which still writes its JSON: the error, and the findings noted so far.
    The full-size token-speed part on the CPU takes minutes (1,000 tokens of a 135M model), so it is still
    running when the signal comes right after its model is ready."""
    out = tmp_path / "token-speed.json"
    part = subprocess.Popen(
        [sys.executable, "-m", "core.bench.gpu_check", "token-speed", "--device", "cpu", "--out", str(out)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for line in part.stderr:
            if "model ready" in line:
                break
        part.send_signal(signal.SIGTERM)
        assert part.wait(timeout=120) == 1
    finally:
        part.kill()
        part.stderr.close()
    found = json.loads(out.read_text())
    assert found["ok"] is False and found["killed"] is True and found["error"] == "killed at its time limit"
    assert found["partial"]["attention_fix"] is True and found["partial"]["dtype"] == "float32"
    assert isinstance(found["partial"]["tokens"], int) and isinstance(found["partial"]["windows"], list)


def test_a_parts_variables_are_set_while_it_runs_and_put_back_after(monkeypatch):
    """core.system.env.variables_set, which the CPU run's one process uses for each part: a variable set before
    gets its value back, one that was unset is removed again, also when the block raises."""
    from core.system.env import ATTENTION_FIX_ENV, CUDA_GRAPHS_ENV, variables_set

    monkeypatch.setenv(CUDA_GRAPHS_ENV, "1")
    monkeypatch.delenv(ATTENTION_FIX_ENV, raising=False)
    with pytest.raises(RuntimeError):
        with variables_set({CUDA_GRAPHS_ENV: "0", ATTENTION_FIX_ENV: "0"}):
            assert os.environ[CUDA_GRAPHS_ENV] == "0" and os.environ[ATTENTION_FIX_ENV] == "0"
            raise RuntimeError("a part that fails")
    assert os.environ[CUDA_GRAPHS_ENV] == "1" and ATTENTION_FIX_ENV not in os.environ
