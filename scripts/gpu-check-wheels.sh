#!/usr/bin/env bash
# The wheels the GPU check carries to the lent machine, which has no network (docs/gpu-check.md): put in
# .whl/ (git-ignored), then name `.whl` in the device call's `carry`. Today: gemlite, for the `gemlite` part
# (issue 37: a well-kept 4-bit kernel measured beside tinygemm). gemlite is published as source only; its
# wheel is pure Python (Triton kernels), built here without its dependencies (the lent machine has Triton 3.6,
# numpy and tqdm).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
mkdir -p .whl
"$PY" -m pip wheel -q --no-deps --disable-pip-version-check -w .whl gemlite==0.6.0.post2
ls -l .whl
