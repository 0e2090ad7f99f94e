"""`specexec models logout`: forget the stored Hugging Face token (HF_TOKEN, if set, still applies)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options."""


def run(args: argparse.Namespace) -> int:
    from core.models.token_store import delete_token

    print("token forgotten" if delete_token() else "no token was stored")
    return 0
