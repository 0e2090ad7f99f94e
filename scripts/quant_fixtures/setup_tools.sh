#!/usr/bin/env bash
# The quantisation tools that pack the tiny fixture checkpoints in tests/fixtures/quantized, in their own
# environment (.venv-llmc, git-ignored): llm-compressor pins transformers <= 5.17 and compressed-tensors 0.19,
# which the app's environment must not get. It brings AutoRound, whose auto_awq export writes AutoAWQ's GEMM
# layout. Two older packages are unpacked beside it without their dependencies, for what the current tools no
# longer do: compressed-tensors 0.12.2 (the last line with act-order `weight_g_idx`) and AutoAWQ 0.2.9
# (archived; only its pure-torch reference dequantisation, awq/utils/packing_utils.py, is used).
# Usage: bash scripts/quant_fixtures/setup_tools.sh   (a few minutes, once; CPU only)
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.venv-llmc
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check torch==2.13.0
"$venv/bin/pip" install -q --disable-pip-version-check llmcompressor==0.14.0.1
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps --target "$venv/extra/ct012" compressed-tensors==0.12.2
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps --target "$venv/extra/autoawq" autoawq==0.2.9
echo "quantisation tools ready in $venv"
