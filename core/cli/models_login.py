"""`specexec models login [--token T]`: keep a Hugging Face token for gated models (read from stdin when not
given, so it stays out of the shell history)."""

from __future__ import annotations

import argparse
import getpass
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--token", default=None, help="the token (default: read from stdin)")


def run(args: argparse.Namespace) -> int:
    from core.models.token_store import save_token

    token = args.token
    if token is None:
        if sys.stdin.isatty():
            print("Create a read token at https://huggingface.co/settings/tokens and paste it here.")
            token = getpass.getpass("Token: ")
        else:
            token = sys.stdin.readline()
    try:
        where = save_token(token)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"token saved in {where}")
    return 0
