"""`python -m core.bench.gpu_check PART --device D --out FILE [--small]`: one part of the GPU check, in its own
process (scripts/gpu-check.sh runs each under its own time limit); its findings as one JSON object in FILE.
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
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.bench.gpu_check")
    parser.add_argument("part", choices=[*PARTS, "report"])
    parser.add_argument("--device", default="cuda", help="cuda or cpu")
    parser.add_argument("--small", action="store_true", help="tiny shapes: a CPU smoke run in seconds")
    parser.add_argument("--out", required=True, help="the part's JSON file; for report: the folder to write into")
    parser.add_argument("--parts", help="report: the folder of the parts' JSON files")
    args = parser.parse_args(argv)
    if args.part == "report":
        from core.bench.gpu_check.report import write_report

        write_report(Path(args.parts), Path(args.out))
        return 0
    import torch

    from core.bench.gpu_check.partial import PartKilled, findings

    def killed(signum: int, frame: object) -> None:
        raise PartKilled

    signal.signal(signal.SIGTERM, killed)
    started = time.perf_counter()
    try:
        module = importlib.import_module(f"core.bench.gpu_check.{PARTS[args.part]}")
        result = {"ok": True, **module.measure(torch.device(args.device), args.small)}
    except PartKilled:
        result = {"ok": False, "error": "killed at its time limit", "killed": True, "partial": findings()}
    except Exception as error:  # noqa: BLE001 - the finding is the error: the report says which part failed and why
        result = {
            "ok": False,
            "error": f"{type(error).__name__}: {error}",
            "traceback": traceback.format_exc(),
            "partial": findings(),
        }
    result["seconds"] = time.perf_counter() - started
    Path(args.out).write_text(json.dumps(result, indent=1, default=str))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
