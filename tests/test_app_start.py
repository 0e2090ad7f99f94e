"""The start script's set-up step (scripts/setup.sh) installs only when the dependencies changed: a second
start performs no install and prints nothing. Run for real in a temporary copy of the project, with a stand-in
`python3` on PATH whose venv's `python` records what it is asked to do (so no package is downloaded)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FAKE_PYTHON3 = """#!/usr/bin/env bash
# Stands in for the system python3: `--version`, and `-m venv DIR`, which makes a venv whose python logs calls.
if [ "$1" = "--version" ]; then echo "Python 3.11.0"; exit 0; fi
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
    calls = tmp_path / "calls.log"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "CALLS": str(calls)}
    env.pop("VIRTUAL_ENV", None)
    return copy, env, calls


def run_setup(copy: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "scripts/setup.sh"], cwd=copy, env=env, capture_output=True, text=True,
                          timeout=60, check=True)


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


def test_a_failed_step_shows_its_output_and_leaves_no_stamp(project):
    copy, env, calls = project
    failing = Path(env["PATH"].split(os.pathsep)[0]) / "python3"
    failing.write_text(FAKE_PYTHON3.replace('echo "$*" >> "%s"', 'echo "$*" >> "%s"; [[ \\"$*\\" != *-e* ]] || '
                                                                 '{ echo broken build >&2; exit 1; }'))
    result = subprocess.run(["bash", "scripts/setup.sh"], cwd=copy, env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0 and "broken build" in result.stderr
    assert not (copy / ".venv" / ".installed").exists()  # the next start tries again
