#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite, headless.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export QT_QPA_PLATFORM=offscreen
python -m pytest -q
