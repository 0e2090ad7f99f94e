#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite, headless.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# litellm pins openai<3 and huggingface-hub<2, so it cannot share .venv: tests/test_serve_api.py drives it
# from its own environment, in a subprocess, against a real server (the version its error mapping was tested
# with). Only the tests need it, so the app's start never installs it.
if [ ! -x .venv-litellm/bin/python ] || ! LITELLM_LOCAL_MODEL_COST_MAP=True .venv-litellm/bin/python -c "import litellm" 2>/dev/null; then
    .venv/bin/python -m venv .venv-litellm  # the interpreter setup.sh checked (3.11+, with venv)
    .venv-litellm/bin/python -m pip install -q --disable-pip-version-check litellm==1.106.0
fi
# instructor 1.17.0 pins jiter<0.15, which the openai 3 client in .venv cannot use: tests/test_serve_agents.py
# drives it from its own environment too, the same way.
if [ ! -x .venv-instructor/bin/python ] || ! .venv-instructor/bin/python -c "import instructor" 2>/dev/null; then
    .venv/bin/python -m venv .venv-instructor  # the interpreter setup.sh checked, as for litellm
    .venv-instructor/bin/python -m pip install -q --disable-pip-version-check instructor==1.17.0
fi
. .venv/bin/activate
export QT_QPA_PLATFORM=offscreen
# Lint and format first: seconds, and they fail before the minutes of tests do ([tool.ruff] in pyproject.toml).
ruff check .
ruff format --check .
# pytest-xdist workers, one more than the cores (tests/conftest.py says why); a test file stays on one
# worker, so its module-scoped servers and engines start once; the longest files go first (conftest.py's
# LONGEST_FILES, an order --no-loadscope-reorder keeps). The edit-test loop: docs/development.md.
python -m pytest -q -n auto --dist loadfile --no-loadscope-reorder "$@"  # extra pytest arguments pass through (e.g. --durations=30)
