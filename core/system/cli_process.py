"""Starting a `specexec` command line as a child process of the app or of its API server (which reads a file
sent to it through `specexec text`), from a source tree or a frozen bundle.

From a source tree or a pip install the child is `python -m core.cli.main ARGS`. A frozen bundle has no
Python that could run `-m`: its sys.executable is the bundle's own `specexec-desktop`, which given
`-m core.cli.main` would open a second window instead of downloading. So the bundle is started with
`--cli ARGS`, and the desktop entry point (app.main) runs that command line and exits.
"""

from __future__ import annotations

import sys

CLI_FLAG = "--cli"


def cli_command(*arguments: str) -> tuple[str, list[str]]:
    """(program, arguments) that run `specexec ARGUMENTS` in a child process, as QProcess.start takes them."""
    if getattr(sys, "frozen", False):
        return sys.executable, [CLI_FLAG, *arguments]
    return sys.executable, ["-m", "core.cli.main", *arguments]
