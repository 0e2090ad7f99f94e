"""Merge the GPU check's parts (one JSON file each, written by `python -m core.bench.gpu_check PART` or, for the
matmul rates, by `specexec bench matmul --json`) into report.json and a short summary.md. A part that is
missing (killed at its time limit) or failed is reported as such: the summary says what did not run."""

from __future__ import annotations

import json
from pathlib import Path

# file stem -> title, in the order the summary lists them
PART_TITLES = {
    "versions": "Versions and attention backends",
    "profile": "Where the time goes: profiler tables (in report.json)",
    "token-speed-fix-off": "ms per token, attention fix off",
    "token-speed-fix-on": "ms per token, attention fix on",
    "passes-eager": "SpecExec pass, eager draft",
    "passes-graphs": "SpecExec pass, CUDA-graph draft",
    "step-graphs": "Plain decoding of a resident target: one-token step eager vs CUDA graphs",
    "matmul": "Draft kernels' read rates (8B draft shapes)",
    "offload": "Synthetic 70B offloaded pass vs the speed model",
    "shadow": "The overlap: a shadow search's draft forwards under the streamed 70B pass",
    "agreement": "Agreement (same seed, same tokens)",
    "graph-vram": "Draft graphs' VRAM: kept vs planned",
    "pinning": "Streamed layers: pinned, pageable, staging ring",
    "gemlite": "gemlite's 4-bit matmul beside tinygemm (8B draft shapes; the engine does not run it)",
}


def _read(path: Path) -> dict:
    if not path.exists():
        return {"ok": False, "error": "no result: the part was killed at its time limit or did not start"}
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return {"ok": False, "error": "its output is not JSON", "output": text[-2000:]}
    return (
        data
        if isinstance(data, dict) and "ok" in data
        else {"ok": True, **(data if isinstance(data, dict) else {"rows": data})}
    )


def _lines(name: str, part: dict) -> list[str]:
    """A few Markdown lines of one part's findings; for a part that failed or was killed, its error and then
    what it had found before."""
    if not part.get("ok"):
        lines = [f"- FAILED: {part.get('error', '?')}"]
        found = part.get("partial") or {}
        if found:
            try:
                shown = _findings(name, found)
            except (KeyError, TypeError, ValueError):
                shown = [f"- (partial findings in report.json: {', '.join(found)})"]
            lines += ["- found before it stopped:", *shown]
        return lines
    return _findings(name, part)


def _findings(name: str, part: dict) -> list[str]:
    if name == "versions":
        packages = part.get("packages", {})
        lines = [
            f"- {part.get('gpu', {}).get('name', 'no GPU')}; torch {packages.get('torch')}, CUDA "
            f"{part.get('torch_cuda')}, cuDNN {part.get('cudnn')}, Triton {packages.get('triton')}, "
            f"transformers {packages.get('transformers')}"
        ]
        for label in ("attention_default", "attention_engine"):
            choice = part.get(label, {}).get("choice", {})
            lines.append(f"- {label.replace('_', ' ')}: " + "; ".join(f"{k}: {v}" for k, v in choice.items()))
        return lines
    if name == "profile":
        return [
            f"- {label}: {part[key]['wall_s']:.2f} s for {part[key][count]} {count} (profiled)"
            for key, label, count in (("plain", "plain answer", "tokens"), ("passes", "SpecExec, budget 64", "passes"))
            if key in part
        ]
    if name.startswith("token-speed"):
        return [
            f"- positions {w['positions']}: {w['median_ms']:.2f} ms median, {w['max_ms']:.1f} max"
            for w in part.get("windows", [])
        ]
    if name.startswith("passes"):
        return [
            f"- budget {r['budget']}: {r['pass_s'] * 1e3:.1f} ms a pass (draft {r['draft_s'] * 1e3:.1f}, target "
            f"{r['target_s'] * 1e3:.1f}), {r['draft_forwards_per_pass']:.1f} forwards"
            for r in part.get("rows", [])
        ]
    if name == "step-graphs":
        difference = part.get("captured_vs_eager_max_abs")
        return [
            *(
                f"- graphs {'on' if r['graphs'] else 'off'} ({'captured' if r['captured'] else 'eager'}): "
                f"{r['median_ms']:.2f} ms a token median, {r['max_ms']:.1f} max"
                for r in part.get("rows", [])
            ),
            f"- same greedy tokens: {part.get('same_tokens')}; captured step vs eager: "
            + ("not captured" if difference is None else f"{difference:.3g} max abs logit difference"),
        ]
    if name == "matmul":
        return [
            f"- {r.get('shape')} rows {r.get('rows')}: "
            + ", ".join(f"{k} {v:.0f}" for k, v in r.items() if k.endswith("gbps") and isinstance(v, (int, float)))
            + " GB/s"
            for r in part.get("rows", [])
        ]
    if name == "offload":
        lines = [f"- copy {part['copy_rate_gbps']:.1f} GB/s ({'pinned' if part['pinned'] else 'not pinned'})"]
        for r in part.get("rows", []):
            p = r["prediction"]
            lines.append(
                f"- budget {r['budget']}: measured target {r['measured_target_s_80_layers']:.3f} s (80 layers), "
                f"model {r['model_target_s_80_layers']:.3f} s, overlap {r['overlap_s_with_draft']:.3f} s; "
                f"predicted for {p['card']}: draft {p['draft_s'] or 0:.3f} s, pass {p['pass_s'] or 0:.3f} s, "
                f"{p['tokens_per_second'] or 0:.2f} tok/s"
            )
        return lines
    if name == "shadow":
        hidden = part["hidden_share"]
        return [
            f"- {part['target_layers']} streamed layers, tree of {part['tree_tokens']}: "
            f"{part['target_alone_s'] * 1e3:.1f} ms alone, {part['target_with_shadow_s'] * 1e3:.1f} ms beside the "
            f"shadow (x{part['target_slowdown']:.2f}; the speed model assumes x1.00)",
            f"- shadow: {part['shadow_forwards']} forwards of {part['draft_rows']} rows ({part['draft_kernel']}), "
            f"{part['draft_forward_s'] * 1e3:.1f} ms each alone; "
            + ("one stream: nothing can hide" if hidden is None else f"{hidden:.0%} of their time hid under the pass"),
        ]
    if name == "agreement":
        return [
            f"- {r['dtype']}: {r['specexec_differs']} of {r['runs']} runs differ, {r['flips_per_10k_tokens']:.1f} "
            f"flips per 10k tokens; plain vs float32 differs in {r['plain_differs_from_float32']}"
            for r in part["rows"]
        ]
    if name == "graph-vram":
        kept = part.get("kept_bytes")
        kept_text = "not measured (no CUDA)" if kept is None else f"{kept / 2**20:.1f} MiB kept"
        return [
            f"- width {part['width']}, {len(part['captured'])} graphs: {kept_text}, "
            f"{part['planned_bytes'] / 2**20:.1f} MiB planned"
        ]
    if name == "pinning":

        def rate(value: float | None) -> str:
            return "refused" if value is None else f"{value / 1e9:.1f} GB/s"

        share = part.get("ring_share_of_pinned")
        modelled = part.get("modelled_ring_bytes_per_second")
        return [
            f"- {part['layers']} x {part['layer_bytes'] / 2**20:.0f} MiB: pinned {rate(part['pinned_bytes_per_second'])}, "
            f"pageable {rate(part['pageable_bytes_per_second'])}, ring of {part['ring_slots']} "
            f"{rate(part['ring_bytes_per_second'])}"
            + ("" if share is None else f" ({share:.0%} of pinned; the speed model assumes {rate(modelled)})")
        ]
    if name == "gemlite":
        return _gemlite_lines(part)
    return []


def _gemlite_lines(part: dict) -> list[str]:
    lines = [f"- the engine's GPTQ layout into gemlite's inputs: {part['conversion_max_error']:.3g} max difference"]
    if part.get("skipped"):
        return [*lines, f"- not measured: {part['skipped']}"]
    for rows, rates in part.get("rates", {}).items():
        gemlite, tinygemm = rates.get("gemlite"), rates.get("tinygemm")
        ratio = "" if not gemlite or not tinygemm else f" (x{gemlite / tinygemm:.2f})"
        shown = "n/a" if tinygemm is None else f"{tinygemm / 1e9:.0f}"
        lines.append(f"- rows {rows}: gemlite {gemlite / 1e9:.0f} GB/s against tinygemm {shown}{ratio}")
    found = part.get("rows", [])
    if found:
        error = max(row["gemlite_relative_error"] for row in found)
        first = max(row["gemlite_first_call_s"] for row in found)
        lines.append(f"- largest error against the dequantised weights: {error:.2g}; slowest first call {first:.1f} s")
    return lines


def write_report(parts: Path, out: Path) -> dict:
    """report.json (every part's JSON under its name, plus `missing`: the parts that did not finish) and
    summary.md in `out`; returns the report."""
    found = {path.stem: _read(path) for path in sorted(parts.glob("*.json"))}
    for name in PART_TITLES:
        found.setdefault(name, _read(parts / f"{name}.json"))
    report = {"parts": found, "failed": [name for name, part in found.items() if not part.get("ok")]}
    versions = found.get("versions", {})
    report["machine"] = versions.get("gpu", {}).get("name") or "CPU (no GPU)"
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    lines = [f"# GPU check on {report['machine']}", ""]
    for name, title in PART_TITLES.items():
        part = found[name]
        seconds = part.get("seconds")
        lines += [
            f"## {title}" + (f" ({seconds:.0f} s)" if isinstance(seconds, (int, float)) else ""),
            *_lines(name, part),
            "",
        ]
    (out / "summary.md").write_text("\n".join(lines))
    return report
