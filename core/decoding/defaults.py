"""The decoding methods' names and the draft tree's default budget and depth, importing nothing: the CLI builds its
parsers from them without loading torch (`specexec generate --help` answers at once)."""

from __future__ import annotations

from typing import Literal, get_args

Method = Literal["specexec", "specinfer", "sequential", "auto"]
METHODS: tuple[str, ...] = get_args(Method)
DEFAULT_BUDGET = 128  # draft tokens per target pass (K) of TreeSettings
DEFAULT_MAX_DEPTH = 32  # deepest draft node (D) of TreeSettings
