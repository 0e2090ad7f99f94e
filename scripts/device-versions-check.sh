#!/usr/bin/env bash
# The engine's GPU path under the lent GPU machine's package versions, on this machine's CPU: run it before a
# GPU comes (docs/gpu-check.md, "Before a GPU comes"). The suite runs the versions pyproject.toml pins (torch
# 2.13, transformers 5.23); the lent machine has torch 2.11+cu130, Triton 3.6 and transformers 5.17, and no
# network, so a difference found only there costs the few minutes of GPU a task may get.
#
#   scripts/device-versions-check.sh [extra pytest arguments]
#
# It builds .venv-device (git-ignored; about 5 GB: the registry's torch 2.11.0 is its CUDA build, which runs on
# a CPU) with only what the lent machine has that the engine imports, so the GPU check's smoke run also shows
# that it needs nothing more; the test tools and the few packages the tests import besides go to a folder of
# their own, put on PYTHONPATH for pytest only. Then: `gpu-check.sh --cpu` with that interpreter, and the test
# files of the GPU path.
#
# Left out, and why: the interpreter runs of tests/test_gptq_matmul.py and the doctor (Triton 3.6's interpreter
# cannot take a kernel's tensor as a loop bound with numpy 2, a fault of that interpreter only: the lent machine
# compiles the kernels, which the file's compile test does here for each GPU generation), and the files that
# need the app, the server, downloads or compressed-tensors, which the GPU check does not run.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${DEVICE_VERSIONS_VENV:-.venv-device}
PY=python3
if python3.12 -c "" 2>/dev/null; then PY=python3.12; fi  # the lent machine's Python

if ! "$VENV/bin/python" -c "import torch, transformers, triton
assert torch.__version__.startswith('2.11.0') and transformers.__version__ == '5.17.0' and triton.__version__ == '3.6.0'" 2>/dev/null; then
    if [ -f "$VENV/pyvenv.cfg" ]; then rm -rf "$VENV"; fi  # a virtual environment of other versions
    "$PY" -m venv "$VENV"
    # --isolated: the registry's own builds, whatever this machine's pip configuration pins or offers locally
    "$VENV/bin/python" -m pip --isolated install -q --disable-pip-version-check \
        torch==2.11.0 triton==3.6.0 transformers==5.17.0 huggingface-hub==1.33.0 safetensors==0.8.0 \
        tokenizers==0.23.2 accelerate==1.15.0 numpy psutil jinja2
    "$VENV/bin/python" -m pip --isolated install -q --disable-pip-version-check --target "$VENV/test-site" \
        --no-deps pytest==9.2.0 pytest-timeout==2.4.0 pytest-xdist==3.8.0 execnet==2.1.2 iniconfig==2.3.1 \
        pluggy==1.7.0 Pygments==2.21.0 platformdirs==4.14.7 llguidance==1.9.1 gguf==0.19.0
fi

REPORT=$(mktemp -d /tmp/specexec-device-versions.XXXXXX)
PYTHON="$VENV/bin/python" bash scripts/gpu-check.sh --cpu --out "$REPORT"

FILES=(
    exactness offload meta_device trace step_graphs draft_graphs draft_search gptq gptq_draft gptq_kernel int4pack
    sampling penalties generation overlap_stats subtree_keep staging autotune speed fit memory architectures
)
PATHS=()
for name in "${FILES[@]}"; do PATHS+=("tests/test_$name.py"); done
PATHS+=(tests/test_gptq_matmul.py::test_kernel_compiles_for_the_gpus_the_torch_build_targets)  # with Triton 3.6
PYTHONPATH="$PWD:$PWD/$VENV/test-site" "$VENV/bin/python" -m pytest -q -n auto --dist loadfile -p no:cacheprovider \
    "${PATHS[@]}" "$@"
