"""`specexec bench <name>`: dispatch to the benchmark modules in core/bench."""

from __future__ import annotations

import argparse
import importlib

BENCHMARKS = {
    "acceptance": ("core.bench.acceptance", "tokens per target pass per method and budget"),
    "offload": ("core.bench.offload", "streamed target pass vs host-to-device copy rate"),
    "download": ("core.bench.download", "model downloads: speed against the loopback server's raw rate, resume saving"),
    "chat": ("core.bench.chat", "chat: time to first token with KV reuse, streaming latency through the engine"),
    "agreement": ("core.bench.agreement", "same seed, same tokens: SpecExec vs sequential in a dtype (16-bit flips)"),
    "draws": ("core.bench.draws", "how often each token draw flips between a tree pass's and a one-row pass's logits"),
    "memory": ("core.bench.memory", "host RAM and VRAM plan of an offloaded 70B GPTQ target per GPU size"),
    "serve": ("core.bench.serve", "the API server: an answer over HTTP vs straight through the engine client"),
    "autotune": ("core.bench.autotune", "automatic method and budget against a sweep of fixed settings"),
    "calibration": ("core.bench.calibration", "the speed model against every offloaded row of the SpecExec paper"),
    "trace": ("core.bench.trace", "GPU proxies per SpecExec pass: host syncs, kernels, host-to-device bytes"),
    "matmul": ("core.bench.matmul", "the fused 4-bit matmul's bandwidth at a draft's shapes (and a launch sweep)"),
    "formats": ("core.bench.formats", "converting AWQ / compressed-tensors layers into the GPTQ layout, per 70B layer"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="benchmark", required=True)
    for name, (module, help_text) in BENCHMARKS.items():
        command = sub.add_parser(name, help=help_text)
        importlib.import_module(module).add_arguments(command)
        command.set_defaults(bench_module=module)


def run(args: argparse.Namespace) -> int:
    return importlib.import_module(args.bench_module).run(args)
