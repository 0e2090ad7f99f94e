"""`specexec models import PATH [--link]`: add a model folder or a .gguf file to the models folder, checked
first; `--link` registers it where it is instead of copying."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="a model folder (config.json + weights) or a .gguf file")
    parser.add_argument("--link", action="store_true", help="link to it in place instead of copying")
    parser.add_argument("--dir", default=None, help="models folder (default: the app's)")


def run(args: argparse.Namespace) -> int:
    from core.models.importing import import_model
    from core.system.locations import models_dir

    root = Path(args.dir).expanduser() if args.dir else models_dir()
    destination = import_model(Path(args.path), root, link=args.link)
    print(f"{'linked' if args.link else 'imported'}: {destination}")
    print(f"Use it with: specexec chat --target '{destination}'")
    return 0
