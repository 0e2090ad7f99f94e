"""`specexec models delete NAME [--yes]`: remove a model (a folder name from `models list`, a repo id, or a
pair id for both of its models). Asks first on a terminal; a linked model loses only its link."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="folder name from `specexec models list`, repo id, or pair id")
    parser.add_argument("--dir", default=None, help="models folder (default: the app's)")
    parser.add_argument("--yes", action="store_true", help="do not ask")


def run(args: argparse.Namespace) -> int:
    from core.cli.models_download import EXIT_BUSY
    from core.errors import DownloadBusyError
    from core.models.catalog import load_catalog
    from core.planning.sizes import format_bytes
    from core.models.installed import delete_model, folder_bytes, resolve_name
    from core.system.locations import models_dir

    root = Path(args.dir).expanduser() if args.dir else models_dir()
    paths = resolve_name(root, args.name, load_catalog())
    for path in paths:
        what = (
            f"the link {path} (the files it points at stay)"
            if path.is_symlink()
            else (f"{path} ({format_bytes(folder_bytes(path))})")
        )
        if not args.yes:
            if not sys.stdin.isatty():
                print(f"error: would delete {what}; pass --yes to confirm when not on a terminal", file=sys.stderr)
                return 2
            if input(f"Delete {what}? [y/N] ").strip().lower() not in ("y", "yes"):
                print("kept")
                continue
        try:
            delete_model(path)
        except DownloadBusyError as error:
            who = f" (pid {error.pid})" if error.pid is not None else ""
            print(
                f"error: not deleted: {path} is downloading in another process{who}. Stop that download "
                "first, then delete it.",
                file=sys.stderr,
            )
            return EXIT_BUSY
        print(f"deleted {path}")
    return 0
