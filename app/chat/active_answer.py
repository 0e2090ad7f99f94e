"""The answer that streams now, as the chat controller (app/chat/controller.py) follows it: the text and thinking
shown, saved and still to flush, the prompt's reading and the thinking's timing, and with tools the round of
calls in progress (app/chat/tool_calls_mixin.py)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ActiveAnswer:
    request_id: str
    conversation_id: int
    message_id: int
    text: str = ""
    pending: str = ""
    saved: str = ""
    reading: dict = field(default_factory=dict)  # prompt_tokens / reused_tokens once the engine reads the prompt
    reading_since: float | None = None  # time.monotonic() at PromptStarted, until the first token
    reasoning: str = ""  # a thinking model's thinking so far (shown)
    pending_reasoning: str = ""
    saved_reasoning: str = ""
    thinking: dict = field(default_factory=dict)  # thinking_started_at while it thinks, then thinking_seconds
    thinking_since: float | None = None  # time.monotonic() at the first thought, until the answer's first word
    tool_rounds: list = field(default_factory=list)  # this answer's rounds of calls (app/chat/tool_turns.py)
    waiting: list = field(default_factory=list)  # records of the current round still to ask about or run
    running: object = None  # the concurrent Future of the call that runs
    raw: str = ""  # with tools: the round's text as written, calls included (`text` shows it without them)
    calls: object = None  # with tools: the round's core.text.tool_calls.ToolCallStream
    offered: frozenset = frozenset()  # the model's names of the tools this round was offered (the chat's servers)
    earlier: dict = field(default_factory=dict)  # a continued answer's stats kept: how long it thought, edited

    def live_stats(self) -> dict:
        """What the answer's bubble shows while it streams: the prompt being read, how long it has thought."""
        return {**self.earlier, **self.reading, **self.thinking}
