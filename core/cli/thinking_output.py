"""How `specexec generate` and `specexec chat` print a thinking model's answer: the thinking dimmed before the
answer on a terminal, or (when stdout is a file or a pipe) on stderr, so that stdout holds the answer alone;
`--hide-thinking` drops it. NO_COLOR (https://no-color.org) turns the dimming off. On a terminal, the control
characters in either are shown, not obeyed (core.text.terminal); a file or a pipe gets the text exact."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO

from core.text.terminal import shown_on_terminal

DIM, RESET = "\x1b[2m", "\x1b[0m"


def add_thinking_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--hide-thinking",
        action="store_true",
        help="do not show a thinking model's reasoning (its <think> block), only the answer",
    )
    parser.add_argument(
        "--no-think",
        action="store_true",
        help="ask the model not to think, where its chat template can turn thinking off (Qwen3)",
    )


def template_kwargs(args: argparse.Namespace) -> dict[str, bool]:
    """The chat template variables the thinking flags ask for."""
    return {"enable_thinking": False} if getattr(args, "no_think", False) else {}


class ThinkingPrinter:
    """Prints streamed reasoning and answer text (see the module docstring). Call `end()` after the answer."""

    def __init__(self, hide: bool, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.hide = hide
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.inline = self.out.isatty()  # a terminal: thinking goes inline, dimmed
        self.dim = self.inline and not os.environ.get("NO_COLOR")
        self._thinking_on_terminal = self.inline or self.err.isatty()  # asked once, not per streamed piece
        self._thinking = False  # reasoning shown and not yet closed

    def write(self, reasoning: str, text: str) -> None:
        if reasoning and not self.hide:
            target = self.out if self.inline else self.err
            if not self._thinking and self.dim:
                target.write(DIM)
            self._thinking = True
            target.write(shown_on_terminal(reasoning) if self._thinking_on_terminal else reasoning)
            target.flush()
        if text:
            self._close()
            self.out.write(shown_on_terminal(text) if self.inline else text)
            self.out.flush()

    def end(self) -> None:
        self._close()

    def _close(self) -> None:
        """End the shown reasoning: the terminal's normal colour again, and a blank line before the answer."""
        if not self._thinking:
            return
        self._thinking = False
        target = self.out if self.inline else self.err
        target.write((RESET if self.dim else "") + ("\n\n" if self.inline else "\n"))
        target.flush()
