"""`python -m core.bench.gpu_check PART --device D --out FILE [--small]`: one part of the GPU check, in its own
process (scripts/gpu-check.sh runs each under its own time limit); its findings as one JSON object in FILE.
`python -m core.bench.gpu_check sequence --device cpu --small --parts DIR NAME=PART[:ENV=VALUE,...] ...`:
several parts one after another in this one process, each with its environment variables set while it runs,
each writing DIR/NAME.json (the CPU smoke run: a process per part would import torch a dozen times).
`python -m core.bench.gpu_check report --parts DIR --out DIR`: merge the parts into report.json and summary.md.
"""

from __future__ import annotations

import argparse
import importlib
import json
import signal
import sys
import time
import traceback
from pathlib import Path

# part name -> module in this package with `measure(device, small: bool) -> dict`
PARTS = {
    "versions": "versions",
    "token-speed": "token_speed",
    "passes": "passes",
    "offload": "offload",
    "agreement": "agreement",
    "graph-vram": "graph_vram",
    "pinning": "pinning",
    "step-graphs": "step_graphs",
    "profile": "profile",
    "shadow": "shadow",
    "gemlite": "gemlite_rate",
}


def _run_part(part: str, device: str, small: bool, out: Path) -> dict:
    """Measure one part, write its JSON to `out` and return it (killed or failed: the error and its partial
    findings). A SIGTERM from `timeout` ends the part as PartKilled (the handler main installs)."""
    import torch

    from core.bench.gpu_check import partial

    partial.reset()
    started = time.perf_counter()
    try:
        module = importlib.import_module(f"core.bench.gpu_check.{PARTS[part]}")
        result = {"ok": True, **module.measure(torch.device(device), small)}
    except partial.PartKilled:
        result = {"ok": False, "error": "killed at its time limit", "killed": True, "partial": partial.findings()}
    except Exception as error:  # noqa: BLE001 - the finding is the error: the report says which part failed and why
        result = {
            "ok": False,
            "error": f"{type(error).__name__}: {error}",
            "traceback": traceback.format_exc(),
            "partial": partial.findings(),
        }
    result["seconds"] = time.perf_counter() - started
    out.write_text(json.dumps(result, indent=1, default=str))
    return result


def _plan_item(text: str) -> tuple[str, str, dict[str, str]]:
    """'NAME=PART[:ENV=VALUE,...]' -> (NAME, PART, {ENV: VALUE})."""
    head, _, assignments = text.partition(":")
    name, _, part = head.partition("=")
    if part not in PARTS:
        raise argparse.ArgumentTypeError(f"{text!r}: use NAME=PART with PART one of {', '.join(PARTS)}")
    env = dict(item.split("=", 1) for item in assignments.split(",") if "=" in item)
    return name, part, env


def _run_sequence(plan: list[tuple[str, str, dict[str, str]]], device: str, small: bool, parts: Path) -> int:
    """Each planned part in turn with its environment variables set (and put back after); stops at a kill."""
    from core.system.env import variables_set

    failed = 0
    for name, part, env in plan:
        with variables_set(env):
            print(f"gpu-check: {name} (in one process)", file=sys.stderr, flush=True)
            result = _run_part(part, device, small, parts / f"{name}.json")
        failed += not result["ok"]
        if result.get("killed"):
            return 1
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.bench.gpu_check")
    parser.add_argument("part", choices=[*PARTS, "report", "sequence"])
    parser.add_argument("plan", nargs="*", type=_plan_item, help="sequence: NAME=PART[:ENV=VALUE,...] items")
    parser.add_argument("--device", default="cuda", help="cuda or cpu")
    parser.add_argument("--small", action="store_true", help="tiny shapes: a CPU smoke run in seconds")
    parser.add_argument("--out", help="the part's JSON file; for report: the folder to write into")
    parser.add_argument("--parts", help="report, sequence: the folder of the parts' JSON files")
    args = parser.parse_args(argv)
    if args.part == "report":
        from core.bench.gpu_check.report import write_report

        write_report(Path(args.parts), Path(args.out))
        return 0
    from core.bench.gpu_check.partial import PartKilled

    def killed(signum: int, frame: object) -> None:
        raise PartKilled

    signal.signal(signal.SIGTERM, killed)
    if args.part == "sequence":
        return _run_sequence(args.plan, args.device, args.small, Path(args.parts))
    if not args.out:
        parser.error("--out FILE is needed for a part")
    return 0 if _run_part(args.part, args.device, args.small, Path(args.out))["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
