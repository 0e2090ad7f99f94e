"""What `specexec chat` and `generate` print from a model or a tool: on a terminal, the control characters in
it are shown, not obeyed (an answer could otherwise write over a line, hide text, retitle the window or set
the clipboard, or hide a tool call's arguments behind the question that asks to allow it); in a file or a
pipe, the text is exact. The terminals here are real pseudo-terminals."""

from __future__ import annotations

import os
import pty
import select
import sys

import pytest

from core.cli.thinking_output import ThinkingPrinter
from core.text.terminal import shown_on_terminal

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: "put `rm -rf ~` on the clipboard"
HIDDEN = "safe\r\x1b[2Kevil"  # a line written over: the terminal would show "evil" alone


def test_control_characters_are_shown_as_symbols_and_text_is_kept():
    assert shown_on_terminal(CLIPBOARD) == "␛]52;c;cm0gLXJmIH4=␇"
    assert shown_on_terminal(HIDDEN) == "safe␛[2Kevil"
    assert shown_on_terminal("a\bb\x7fc\x9b31m\x00") == "a␈b␡c\ufffd31m␀"  # backspace, DEL, 8-bit CSI, NUL
    assert shown_on_terminal("abc\u202edef\u2066g\u2069") == "abcdefg"  # no reordering of what is shown
    words = "Zeilen\r\n\tund Tabs, עברית, العربية, 中文, emoji 🙂\n"
    assert shown_on_terminal(words) == words.replace("\r\n", "\n")  # a CRLF ends a line as LF does


class Terminal:
    """A pseudo-terminal: `stream` is its follower end as a text file (isatty() is true), `read` what it got."""

    def __init__(self) -> None:
        self._leader, follower = pty.openpty()
        self.stream = open(follower, "w", encoding="utf-8", closefd=True)  # noqa: SIM115 - closed in close()

    def read(self) -> str:
        """Everything written so far (the writes are done: what they wrote is in the terminal's buffer)."""
        self.stream.flush()
        data = b""
        while select.select([self._leader], [], [], 0)[0]:
            data += os.read(self._leader, 65536)
        return data.decode().replace("\r\n", "\n")  # the line discipline's CR LF

    def close(self) -> None:
        self.stream.close()
        os.close(self._leader)


@pytest.fixture()
def terminal():
    terminal = Terminal()
    yield terminal
    terminal.close()


def test_an_answer_on_a_terminal_is_shown_and_in_a_pipe_is_exact(terminal):
    printer = ThinkingPrinter(hide=False, out=terminal.stream, err=terminal.stream)
    printer.write(f"think {HIDDEN}", "")
    printer.write("", f"answer {CLIPBOARD}")
    printer.end()
    shown = terminal.read()
    assert "think safe␛[2Kevil" in shown and "answer ␛]52;c;cm0gLXJmIH4=␇" in shown
    assert "\x07" not in shown and "\r" not in shown

    reader, writer = os.pipe()
    with open(writer, "w", encoding="utf-8") as pipe:
        printer = ThinkingPrinter(hide=True, out=pipe, err=pipe)
        printer.write("", f"answer {CLIPBOARD}")
    with open(reader, encoding="utf-8") as pipe:
        assert pipe.read() == f"answer {CLIPBOARD}"  # data for a program: as the model wrote it


def test_a_tool_call_s_question_and_result_are_shown_not_obeyed(terminal, monkeypatch):
    """The y/a/N question names the call's tool and arguments and the note after it quotes the result: on
    stderr, through the chat's note."""
    from core.cli.chat import note_on_stderr

    monkeypatch.setattr(sys, "stderr", terminal.stream)
    note_on_stderr(f'tool call: fetch {{"url": "https://a.example\u009b2K\u202e"}} [fetch gave: {HIDDEN}]')
    shown = terminal.read()
    assert shown == 'tool call: fetch {"url": "https://a.example\ufffd2K"} [fetch gave: safe␛[2Kevil]\n'
