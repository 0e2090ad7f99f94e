"""The chat controller's tool calls (a mixin of ChatController): the calls read from a finished answer, each
asked about on its card or allowed already, run on the toolbox's thread, and the model asked to go on with their
results; at most core.tools.loop.MAX_ROUNDS rounds an answer. The state lives on the controller's ActiveAnswer (app/chat/active_answer.py)."""

from __future__ import annotations

from app.chat import tool_turns as T
from app.conversations import store as S
from core.tools.loop import MAX_ROUNDS, Approvals, Decision, cap_note, read_calls


def answer_words(pieces: list) -> str:
    """The answer's words among a ToolCallStream's pieces (the calls' pieces are shown as cards instead)."""
    return "".join(piece for piece in pieces if isinstance(piece, str))


class ToolCallsMixin:
    """ChatController's tool-call steps (a mixin: they use the controller's active answer, store, toolbox and
    signals)."""

    def _take_calls(self) -> bool:
        """Read the finished text's calls; True when they make a new round (the answer goes on)."""
        active = self.active
        if active.calls is not None:
            active.pending += answer_words(active.calls.finish())
        self._flush()
        content, calls = read_calls(active.raw, self.tool_format(), self.toolbox, active.offered)
        if not calls:
            active.text = content  # the final answer, without the blank a prefill may leave before it
            return False
        if len(active.tool_rounds) >= MAX_ROUNDS:
            active.text = content
            self._end_answer(S.COMPLETE, {"tool_note": cap_note()})
            return True
        records = [T.call_record(call) for call in calls]
        for call, record in zip(calls, records):
            if call.problem is not None:
                T.finish_call(record, T.ToolResult(call.problem, is_error=True))
        active.tool_rounds.append({"content": content, "calls": records})
        active.waiting = [r for r in records if r["status"] == T.ASKING]
        active.text = active.saved = ""
        self.messages.update(active.message_id, content="", tool_rounds=list(active.tool_rounds))
        self._save_rounds()
        self._next_call()
        return True

    def _approvals(self) -> Approvals:
        return self.approvals.setdefault(self.active.conversation_id, Approvals())

    def _next_call(self) -> None:
        """Ask about, or run, the round's next call; once none is left, the model answers again."""
        active = self.active
        if active is None:
            return
        if not active.waiting:
            self._continue_answer()
            return
        record = active.waiting[0]
        if self._approvals().needs_asking(record["server"], record["name"]):
            record["status"] = T.ASKING
            self._show_rounds()
            self.tool_call_waiting.emit(active.message_id, record["id"])
            return
        record["decision"] = record["decision"] or "auto"
        self._run(record)

    def open_question(self) -> str | None:
        """The id of the call a card asks about now, if any."""
        active = self.active
        if active is None or not active.waiting or active.running is not None:
            return None
        return active.waiting[0]["id"] if active.waiting[0]["status"] == T.ASKING else None

    def decide(self, call_id: str, decision: Decision) -> bool:
        """The user's answer to the card of call `call_id` (False: no such open question)."""
        if call_id != self.open_question():
            return False
        active = self.active
        record = active.waiting[0]
        record["decision"] = decision
        self._approvals().record(record["server"], record["name"], decision)
        if decision == "deny":
            T.deny_call(record)
            active.waiting.pop(0)
            self._save_rounds()
            self._next_call()
        else:
            self._run(record)
        return True

    def _run(self, record: dict) -> None:
        active = self.active
        record["status"] = T.RUNNING
        self._show_rounds()
        future = self.toolbox.submit(record["name"], record["arguments"])
        active.running = future
        call_id = record["id"]
        future.add_done_callback(lambda done: self._tool_done.emit(call_id, done))

    def _continue_answer(self) -> None:
        """The round's calls are done: the model answers again, with them, into the same message."""
        active = self.active
        settings = self.conversation_settings(active.conversation_id)
        messages = self.history(active.conversation_id, leave_out=active.message_id)
        messages += T.rounds_to_messages(active.tool_rounds)
        active.request_id = self.bridge.new_request_id()
        self._show_rounds()
        self._generate(messages, settings, active.request_id)

    def _show_rounds(self) -> None:
        active = self.active
        if active is not None:
            self.messages.update(
                active.message_id,
                tool_rounds=[dict(r, calls=[dict(c) for c in r["calls"]]) for r in active.tool_rounds],
            )

    def _save_rounds(self) -> None:
        active = self.active
        if active is not None:
            self._show_rounds()
            self.store.update_message(active.message_id, tool_rounds=active.tool_rounds)
