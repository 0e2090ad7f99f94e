#!/usr/bin/env bash
# Set up (scripts/setup.sh) and start the desktop app. On Linux, check first that a window can open: Qt's xcb
# platform needs system libraries (libxcb-cursor0, libxcb-icccm4, libxcb-keysyms1, ...) that bare desktops
# lack; without them the app could not start, so say what to install instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
python -m app.system.library_check >/dev/null || exit 1
exec specexec-desktop "$@"
