"""An answer's stats and tool calls as read back (app/conversations/message_fields.py): what the app writes comes
back whole; a value of another type, read from a damaged database or an imported file, is left out before the
chat view formats it; a call an answer left open when the app died reads as stopped. A real SQLite store."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.chat import tool_turns as T
from app.conversations import store as S
from app.conversations.message_fields import STATS_FIELDS, checked_rounds, checked_stats
from app.conversations.store import Store
from core.tools.loop import STOPPED_TEXT

APP = Path(__file__).resolve().parent.parent / "app"

# As the app saves them: an answer that thought and was cut off at its longest, and one that failed on a long
# document with Make room offered; while an answer is written, where it waits and what it reads.
FINISHED = {
    "tokens": 412,
    "passes": 97,
    "tokens_per_s": 6.52,
    "tokens_per_pass": 4.247,
    "budget": 128,
    "prompt_tokens": 1830,
    "reused_tokens": 1200,
    "whole_conversation": False,
    "expected_s": 3.5,
    "generated_tokens": 412,
    "reason": "length",
    "context_full": True,
    "thinking_seconds": 12.5,
    "edited": True,
    "tool_note": "the model called tools 8 times in a row: it was stopped there",
}
FAILED = {
    "error": "the prompt is 40,000 tokens long",
    "hint": "Make room lets the model read it",
    "kind": "context_length",
    "prompt_tokens": 40000,
    "room_tokens": 65536,
}
STREAMING = {"queued_behind": 2, "thinking_started_at": 1_796_000_000.25, "prompt_tokens": 90, "reused_tokens": 0}
CALL = {
    "id": "call_1",
    "name": "add",
    "arguments": {"a": 2, "b": [3]},
    "arguments_text": '{"a": 2, "b": [3]}',
    "server": "calc",
    "status": T.DONE,
    "decision": "once",
    "result": "5",
    "is_error": False,
}


@pytest.mark.parametrize("stats", [FINISHED, FAILED, STREAMING])
def test_the_stats_the_app_writes_come_back_whole(stats):
    assert checked_stats(json.loads(json.dumps(stats))) == stats


def test_every_stats_field_the_app_reads_has_its_type():
    """A field read somewhere in the app but not in STATS_FIELDS would be dropped as it is read: this finds it."""
    read = set()
    for path in APP.rglob("*.py"):
        read |= set(re.findall(r"stats(?:\.get\(|\[)\"(\w+)\"", path.read_text(encoding="utf-8")))
    assert read and read <= set(STATS_FIELDS), read - set(STATS_FIELDS)


@pytest.mark.parametrize(
    "wrong",
    [
        {"tokens": "412"},
        {"tokens": 4.5},
        {"tokens": True},
        {"tokens": -1},
        {"tokens": 10**400},
        {"tokens_per_s": "fast"},
        {"tokens_per_s": float("nan")},
        {"thinking_seconds": float("inf")},
        {"thinking_seconds": [12]},
        {"edited": 1},
        {"error": 5},
        {"hint": None},
        {"tool_note": ["x"]},
        {"context_full": "yes"},
        {"made_up": 1},
    ],
)
def test_a_stats_field_of_another_type_is_left_out(wrong):
    assert checked_stats({**FINISHED, **wrong}) == {key: FINISHED[key] for key in FINISHED if key not in wrong}


@pytest.mark.parametrize("value", [None, [], "stats", 3])
def test_stats_that_are_not_an_object_read_as_none(value):
    assert checked_stats(value) == {}


@pytest.mark.parametrize(
    ("key", "wrong"),
    [
        ("arguments", ["a"]),
        ("arguments", "{}"),
        ("arguments_text", {"a": 2}),
        ("server", None),
        ("status", "exploded"),
        ("status", ["done"]),
        ("decision", 1),
        ("result", 5),
        ("result", ["sun"]),
        ("is_error", "no"),
    ],
)
def test_a_call_field_of_another_type_is_left_out_and_the_call_kept(key, wrong):
    [round_] = checked_rounds([{"content": "Let me add.", "calls": [{**CALL, key: wrong, "x": 1}]}], finished=True)
    assert round_ == {"content": "Let me add.", "calls": [{k: v for k, v in CALL.items() if k != key}]}


def test_calls_without_an_id_or_a_name_or_with_another_calls_id_are_left_out():
    second = {**CALL, "id": "call_2"}
    rounds = [
        {"content": 5, "calls": [CALL, {**CALL, "name": None}, {**CALL, "id": 7}, "call", {**CALL, "result": "6"}]},
        {"content": "then", "calls": [second, {**second, "name": "sub"}]},
        ["not a round"],
        {"calls": {"id": "call_3"}},
    ]
    assert checked_rounds(rounds, finished=True) == [
        {"calls": [CALL]},
        {"content": "then", "calls": [second]},
        {"calls": []},
    ]


@pytest.mark.parametrize("status", T.OPEN_STATUSES)
def test_a_call_left_open_is_stopped_once_its_answer_is_no_longer_written(status):
    open_call = {**CALL, "status": status, "result": ""}
    [round_] = checked_rounds([{"calls": [open_call]}], finished=True)
    assert round_["calls"] == [{**CALL, "status": T.STOPPED, "result": STOPPED_TEXT, "is_error": True}]
    [round_] = checked_rounds([{"calls": [open_call]}], finished=False)  # still written: it may yet be answered
    assert round_["calls"] == [open_call]


def test_a_row_written_by_another_program_reads_as_the_app_wrote_what_it_can(tmp_path):
    store = Store(tmp_path / "c.sqlite3")
    cid = store.create_conversation("Sums")
    answer = store.add_message(cid, "assistant", "5")
    store.update_message(answer.id, stats=FINISHED, tool_rounds=[{"content": "", "calls": [CALL]}])
    assert (store.message(answer.id).stats, store.message(answer.id).tool_rounds) == (
        FINISHED,
        [{"content": "", "calls": [CALL]}],
    )
    stats = {**FINISHED, "tokens_per_s": "fast", "thinking_seconds": float("nan")}
    store.db.execute(
        "UPDATE messages SET stats = ?, tool_rounds = ? WHERE id = ?",
        (json.dumps(stats), json.dumps([{"calls": [{**CALL, "result": ["5"]}]}]), answer.id),
    )
    store.db.commit()
    read = store.message(answer.id)
    assert read.stats == {key: FINISHED[key] for key in FINISHED if key not in ("tokens_per_s", "thinking_seconds")}
    assert read.tool_rounds == [{"calls": [{key: CALL[key] for key in CALL if key != "result"}]}]
    store.close()


def test_a_card_left_asking_when_the_app_died_reads_as_stopped(tmp_path):
    """The app died while a card asked to run a call: after the restart the answer is interrupted and the call
    stopped as Stop would have left it (no card asks with buttons that no longer do anything)."""
    path = tmp_path / "c.sqlite3"
    store = Store(path)
    cid = store.create_conversation()
    store.add_message(cid, "user", "add 2 and 3")
    answer = store.add_message(cid, "assistant", "", S.STREAMING)
    asking = {**CALL, "status": T.ASKING, "decision": "", "result": ""}
    store.update_message(answer.id, tool_rounds=[{"content": "Let me add.", "calls": [asking]}])
    assert store.message(answer.id).tool_rounds[0]["calls"] == [asking]  # while it is written: still asking
    del store  # no close: the app died

    again = Store(path)
    read = again.message(answer.id)
    assert read.status == S.INTERRUPTED
    stopped = dict(asking)
    T.stop_call(stopped)  # as Stop leaves a call
    assert read.tool_rounds == [{"content": "Let me add.", "calls": [stopped]}]
    again.close()
