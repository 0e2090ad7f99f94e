#!/usr/bin/env bash
# Set up (scripts/setup.sh) and start the desktop app.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
exec specexec-desktop "$@"
