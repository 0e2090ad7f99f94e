"""The start script's set-up step (scripts/setup.sh) installs only when the dependencies changed: a second
start performs no install and prints nothing. Run for real in a temporary copy of the project, with a stand-in
`python3` on PATH whose venv's `python` records what it is asked to do (so no package is downloaded)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FAKE_PYTHON3 = """#!/usr/bin/env bash
# Stands in for the system python3: `--version`, the version and venv checks (FAKE_VERSION, FAKE_NO_VENV), and
# `-m venv DIR`, which makes a venv whose python logs calls.
if [ "$1" = "--version" ]; then echo "Python ${FAKE_VERSION:-3.11}.0"; exit 0; fi
if [ "$1" = "-c" ]; then
    case "$2" in
        *version_info*) echo "${FAKE_VERSION:-3.11}"; exit 0 ;;
        *ensurepip*) [ -z "${FAKE_NO_VENV:-}" ] || { echo "No module named 'ensurepip'" >&2; exit 1; }; exit 0 ;;
        *hashlib*) exec "$REAL_PYTHON" "$@" ;;
    esac
fi
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
    mkdir -p "$3/bin"
    printf 'export PATH="%s/bin:$PATH"\\n' "$(cd "$3" && pwd)" > "$3/bin/activate"
    printf '#!/usr/bin/env bash\\necho "$*" >> "%s"\\n' "$CALLS" > "$3/bin/python"
    chmod +x "$3/bin/python"
    exit 0
fi
echo "unexpected python3 call: $*" >&2; exit 2
"""


@pytest.fixture()
def project(tmp_path):
    """A copy of what setup.sh reads (pyproject.toml, the script) and a stand-in python3 on PATH."""
    copy = tmp_path / "project"
    (copy / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    shutil.copy(ROOT / "scripts" / "setup.sh", copy / "scripts" / "setup.sh")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python3"
    fake.write_text(FAKE_PYTHON3)
    fake.chmod(0o755)
    for other in ("python3.11", "python3.12", "python3.13", "python3.14"):  # none besides python3 on this "PC"
        absent = bin_dir / other
        absent.write_text("#!/usr/bin/env bash\nexit 127\n")
        absent.chmod(0o755)
    calls = tmp_path / "calls.log"
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, "PATH": path, "CALLS": str(calls), "REAL_PYTHON": sys.executable}
    env.pop("VIRTUAL_ENV", None)
    return copy, env, calls


def run_setup(copy: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "scripts/setup.sh"], cwd=copy, env=env, capture_output=True, text=True, timeout=60, check=True
    )


def installs(calls: Path) -> list[str]:
    return [line for line in calls.read_text().splitlines() if "pip install" in line] if calls.exists() else []


def test_second_start_installs_nothing_and_prints_nothing(project):
    copy, env, calls = project
    first = run_setup(copy, env)
    assert "first start, installing" in first.stdout and "installed." in first.stdout
    done = installs(calls)
    assert any("torch==2.13.0" in line for line in done) and any("-e .[test]" in line for line in done)
    second = run_setup(copy, env)
    assert second.stdout == "" and second.stderr == ""
    assert installs(calls) == done  # no pip call at all

    with (copy / "pyproject.toml").open("a") as pyproject:  # a dependency changed: install again, and say so
        pyproject.write("\n# a new pin\n")
    third = run_setup(copy, env)
    assert "dependencies changed" in third.stdout and len(installs(calls)) == 2 * len(done)


def test_the_set_up_needs_no_sha256sum(project):
    """macOS has no sha256sum (GNU coreutils): the stamp's hash is the Python's own, the same digest as before."""
    copy, env, calls = project
    missing = Path(env["PATH"].split(os.pathsep)[0]) / "sha256sum"
    missing.write_text('#!/usr/bin/env bash\necho "sha256sum: command not found" >&2\nexit 127\n')
    missing.chmod(0o755)
    first = run_setup(copy, env)
    assert "installed." in first.stdout and first.stderr == ""
    digest = hashlib.sha256((copy / "pyproject.toml").read_bytes() + (copy / "scripts" / "setup.sh").read_bytes())
    assert (copy / ".venv" / ".installed").read_text() == f"{digest.hexdigest()} Python 3.11.0\n"
    assert run_setup(copy, env).stdout == ""  # and the second start finds its stamp


def test_a_failed_step_shows_its_output_and_leaves_no_stamp(project):
    copy, env, calls = project
    failing = Path(env["PATH"].split(os.pathsep)[0]) / "python3"
    failing.write_text(
        FAKE_PYTHON3.replace(
            'echo "$*" >> "%s"', 'echo "$*" >> "%s"; [[ \\"$*\\" != *-e* ]] || { echo broken build >&2; exit 1; }'
        )
    )
    result = subprocess.run(["bash", "scripts/setup.sh"], cwd=copy, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "broken build" in result.stderr
    assert not (copy / ".venv" / ".installed").exists()  # the next start tries again


@pytest.mark.parametrize(
    "fake, says",
    [
        (
            {"FAKE_VERSION": "3.10"},
            ["needs Python 3.11 or newer; python3 here is 3.10", "sudo apt install python3.11 python3.11-venv"],
        ),
        ({"FAKE_NO_VENV": "1"}, ["its venv module is not installed", "sudo apt install python3.11-venv"]),
    ],
)
def test_an_old_python_or_a_missing_venv_module_is_said_before_anything_is_made(project, fake, says):
    """Ubuntu 22.04's python3 is 3.10; Debian and Ubuntu ship venv's pip bootstrap apart (python3.X-venv)."""
    copy, env, calls = project
    result = subprocess.run(
        ["bash", "scripts/setup.sh"], cwd=copy, env={**env, **fake}, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1 and result.stdout == ""
    for words in says:
        assert words in result.stderr, result.stderr
    assert not (copy / ".venv").exists() and not calls.exists()  # nothing created, nothing installed
