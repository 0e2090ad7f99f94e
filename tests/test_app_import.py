"""Chats exported as JSON and imported again (app/conversations/import_chat.py, Chat > Import chats…): what an
export holds comes back whole, and a file that is not such an export (not JSON, the wrong fields, too big, a
pipe) is refused in words before anything is stored. Real files, a real SQLite store, a real window and its
file chooser."""

from __future__ import annotations

import json
import os
import random
from datetime import datetime, timezone

import pytest

from app.conversations import store as S
from app.conversations.export import to_json
from app.conversations.import_chat import MAX_IMPORT_BYTES, ChatImportError, read_export
from app.conversations.store import Store
from json_mutation import mutated_json

CALL = {"id": "c1", "name": "weather", "arguments": {}, "result": "sun"}
ROUNDS = [{"content": "Let me look.", "calls": [CALL]}]


def exported_chat(store: Store) -> int:
    """A chat with a system prompt, a regenerated answer, thinking, a tool call and a stopped answer."""
    cid = store.create_conversation("Trip to Lisbon", json.dumps({"system_prompt": "Answer briefly."}))
    store.add_message(cid, "user", "Where to go?")
    first = store.add_message(cid, "assistant", "Lisbon.")
    second = store.add_alternative(first.id)
    store.update_message(
        second.id, content="Porto.", status=S.COMPLETE, stats={"tokens": 2}, reasoning="Hmm.", tool_rounds=ROUNDS
    )
    store.add_message(cid, "user", "And in winter?")
    store.add_message(cid, "assistant", "Madei", S.STOPPED)
    return cid


def test_an_exported_chat_comes_back_whole_as_a_new_chat(tmp_path):
    store = Store(tmp_path / "c.sqlite3")
    cid = exported_chat(store)
    settings = {"system_prompt": "Answer briefly.", "temperature": 0.3}
    path = tmp_path / "trip.json"
    path.write_text(to_json(store.conversation(cid), store.messages(cid), settings), encoding="utf-8")
    chat = read_export(path)
    new = store.add_conversation(chat.title, chat.settings_json, chat.messages, chat.created_at)
    assert new != cid and store.conversation(new).title == "Trip to Lisbon"
    assert json.loads(store.conversation(new).settings_json) == settings
    assert store.conversation(new).created_at == int(store.conversation(cid).created_at)  # to the second, as exported

    def shown(conversation_id: int) -> list[tuple]:
        return [
            (m.role, m.content, m.status, m.stats, m.reasoning, m.tool_rounds) for m in store.messages(conversation_id)
        ]

    assert shown(new) == shown(cid)  # the answers on screen; the alternative left behind is not exported
    assert [m.created_at for m in store.messages(new)] == [int(m.created_at) for m in store.messages(cid)]  # to the s
    store.close()


def test_an_export_saved_by_a_windows_editor_in_utf16_is_read(tmp_path):
    record = {"title": "Grüße", "messages": [{"role": "user", "content": "Hallo ✓"}]}
    path = tmp_path / "chat.json"
    path.write_bytes(json.dumps(record, ensure_ascii=False).encode("utf-16"))  # with its byte-order mark
    chat = read_export(path)
    assert (chat.title, chat.messages[0].content, chat.messages[0].status) == ("Grüße", "Hallo ✓", S.COMPLETE)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"\x89PNG\r\n", "is not a chat exported from SpecExec Desktop \\(Export as JSON…\\): it is not JSON"),
        (b"[1, 2]", "it has no list of messages"),
        (b'{"title": "x", "messages": []}', "it has no messages"),
        (b'{"messages": [{"role": "user", "content": "hi"}]}', "it has no title"),
        (b'{"title": "x", "settings": 3, "messages": []}', "its settings are not an object"),
        (b'{"title": "x", "messages": [{"role": "system", "content": "hi"}]}', "message 1 has the role 'system'"),
        (b'{"title": "x", "messages": [{"role": "user", "content": 5}]}', "message 1 has no text"),
        (b'{"title": "x", "messages": [7]}', "message 1 is not an object"),
        (
            b'{"title": "x", "messages": [{"role": "user", "content": "a", "status": "hacked"}]}',
            "message 1 has the status 'hacked'",
        ),
        (  # a wrong value is quoted short (a toast says it)
            b'{"title": "x", "messages": [{"role": "user", "content": "a", "status": "' + b"x" * 100_000 + b'"}]}',
            "message 1 has the status 'x{17}\\.\\.\\.x{18}'$",
        ),
        (
            b'{"title": "x", "messages": [{"role": [' + b"0, " * 10_000 + b'0], "content": "a"}]}',
            r"message 1 has the role \[0, 0, 0, 0, 0, 0, \.\.\.\] \(an export has user and assistant\)$",
        ),
        (
            b'{"title": "x", "messages": [{"role": "assistant", "content": "a", "reasoning": []}]}',
            "message 1's thinking is not text",
        ),
        (b"[" * 100_000 + b"]" * 100_000, "it is not JSON"),  # nesting deeper than the parser goes
    ],
)
def test_a_file_that_is_not_an_export_is_refused_in_words(tmp_path, content, words):
    path = tmp_path / "odd.json"
    path.write_bytes(content)
    with pytest.raises(ChatImportError, match=f"^odd.json .*{words}"):
        read_export(path)


def test_a_file_too_big_a_folder_or_a_pipe_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.json"
    with big.open("wb") as handle:
        handle.truncate(MAX_IMPORT_BYTES + 1)  # sparse: no disk used
    with pytest.raises(ChatImportError, match="big.json is larger than a chat export \\(64 MB at most\\)"):
        read_export(big)
    with pytest.raises(ChatImportError, match="is not a file that can be read"):
        read_export(tmp_path)
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)  # reading it would wait for a writer forever
    with pytest.raises(ChatImportError, match="pipe.json is not a file that can be read"):
        read_export(pipe)


def test_an_answer_exported_while_it_was_written_comes_back_interrupted_and_bad_extras_are_dropped(tmp_path):
    record = {
        "title": "  Half   an answer ",
        "created_at": "not a time",
        "messages": [
            {"role": "user", "content": "Tell me", "created_at": "2026-11-29T10:00:00+00:00"},
            {"role": "assistant", "content": "Once", "status": "streaming", "stats": [1], "tool_rounds": "x"},
        ],
    }
    path = tmp_path / "half.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    chat = read_export(path)
    assert chat.title == "Half an answer" and chat.created_at > 0  # no time: the import's
    user, answer = chat.messages
    assert user.created_at == datetime(2026, 11, 29, 10, tzinfo=timezone.utc).timestamp()
    assert (answer.status, answer.stats, answer.tool_rounds) == (S.INTERRUPTED, {}, [])


@pytest.mark.qt
@pytest.mark.timeout(60)
def test_import_chats_from_the_chat_menu_opens_the_chat_and_says_what_was_not_imported(qtbot, quiet_window, tmp_path):
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QFileDialog

    w = quiet_window
    cid = exported_chat(w.store)
    good = tmp_path / "trip.json"
    good.write_text(w.export_text("json", cid), encoding="utf-8")
    bad = tmp_path / "notes.json"
    bad.write_text('{"title": "Notes", "messages": [{"role": "tool", "content": "x"}]}', encoding="utf-8")
    chats = len(w.store.conversations())

    def choose() -> None:
        dialog = QApplication.activeModalWidget()
        assert isinstance(dialog, QFileDialog) and dialog.fileMode() == QFileDialog.FileMode.ExistingFiles
        dialog.setDirectory(str(tmp_path))
        dialog.selectFile(f'"{good.name}" "{bad.name}"')
        dialog.accept()

    QTimer.singleShot(0, choose)
    next(a for a in w.actions() if a.text() == "&Import chats…").trigger()
    assert len(w.store.conversations()) == chats + 1
    opened = w.controller.conversation_id
    assert opened != cid and w.store.conversation(opened).title == "Trip to Lisbon"
    assert [m.content for m in w.controller.messages.rows] == ["Where to go?", "Porto.", "And in winter?", "Madei"]
    assert w.sidebar.current_id() == opened
    assert w.toast.text() == (
        "Imported 1 chat. notes.json is not a chat exported from SpecExec Desktop (Export as JSON…): message 1 has "
        "the role 'tool' (an export has user and assistant)."
    )


pytest_plugins = ["app_fixtures"]  # fixtures: quiet_window


HOSTILE_ANSWERS = [
    # numbers the view formats, given as text, NaN, a list; words given as numbers; a flag as text
    {"stats": {"tokens": 5, "tokens_per_s": "fast", "tokens_per_pass": [4], "passes": "3"}},
    {"stats": {"tokens": "5", "thinking_seconds": float("nan"), "edited": "no"}, "reasoning": "Hmm."},
    {"status": "error", "stats": {"error": 5, "hint": ["a"], "kind": "context_length", "prompt_tokens": "x"}},
    {"status": "error", "stats": {"kind": "context_length", "prompt_tokens": 100, "room_tokens": "more"}},
    {"stats": {"tool_note": 7, "reason": "length", "context_full": "yes", "prompt_tokens": -4}},
    # tool calls with a result, a status or arguments of another type, a duplicate id, one left asking
    {"tool_rounds": [{"content": 5, "calls": [{**CALL, "result": ["sun"]}, {**CALL, "id": "c2", "result": None}]}]},
    {"tool_rounds": [{"content": "x", "calls": [{**CALL, "status": {"a": 1}}, {**CALL, "arguments": "city"}]}]},
    {"tool_rounds": [{"calls": [{**CALL, "status": "asking"}, {**CALL, "status": "running", "id": "c3"}]}]},
]


@pytest.mark.qt
@pytest.mark.timeout(120)
def test_answers_whose_stats_and_calls_are_of_other_types_open_and_export(qtbot, quiet_window, tmp_path):
    """An export's answers hold stats the chat formats as numbers and words, and tool calls it shows as cards:
    given of another type (a speed as text, NaN, a result as a list, a call still asking), each such chat, and
    200 seeded mutations of a real answer's stats and calls, is imported, opens with every message on screen
    and exports again. pytest-qt fails the test on an exception in the view; before the stats and calls were
    checked as they are read, 7 of the 8 chats above broke the view, and the eighth showed a card asking to
    run a call with buttons that did nothing."""
    from app.chat.tool_card import ToolCallCard

    w = quiet_window
    cid = exported_chat(w.store)
    answer = next(m for m in w.store.messages(cid) if m.tool_rounds)
    speed = {"tokens": 20, "passes": 5, "tokens_per_s": 3.5, "tokens_per_pass": 4.0, "thinking_seconds": 3.0}
    w.store.update_message(answer.id, stats={**speed, "edited": True, "reason": "length", "tool_note": "a note"})
    export = json.loads(w.export_text("json", cid))
    chosen = random.Random(45)
    mutations = list(HOSTILE_ANSWERS)
    for _ in range(200):
        fields = {key: export["messages"][1][key] for key in ("stats", "tool_rounds")}
        for _ in range(chosen.randrange(1, 4)):
            fields = mutated_json(fields, chosen, ["stats", "tool_rounds", "tokens_per_s", "result", "status"])
        if isinstance(fields, dict):  # the message's other fields (its status) are the import's own to refuse
            mutations.append({key: fields[key] for key in fields if key in ("stats", "tool_rounds")})
    for number, fields in enumerate(mutations):
        record = {**export, "messages": [*export["messages"][:1], {**export["messages"][1], **fields}]}
        path = tmp_path / f"chat-{number}.json"
        path.write_text(json.dumps(record), encoding="utf-8")
        w.import_chats([path])
        assert w.toast.text() == "Imported 1 chat.", fields
        shown = w.controller.messages.rows
        assert (
            [v.message.content for v in w.chat_view.widgets] == [m.content for m in shown] == ["Where to go?", "Porto."]
        )
        assert not any(card.asking for card in w.chat_view.findChildren(ToolCallCard))
        assert json.loads(w.export_text("json"))["messages"][1]["content"] == "Porto."
        assert "Porto." in w.export_text("markdown")


@pytest.mark.qt
@pytest.mark.timeout(60)
def test_export_all_chats_writes_each_once_and_import_takes_them_all_back(qtbot, quiet_window, tmp_path):
    """Chat > Export all chats… into a folder (two chats of one title and a file already there keep apart
    names), then Import chats… of the whole folder on a fresh store: the same chats, the same messages."""
    w = quiet_window
    exported_chat(w.store)
    for title in ("Notes", "Notes"):
        w.store.add_message(w.store.create_conversation(title), "user", f"about {title}")
    folder = tmp_path / "backup"
    folder.mkdir()
    (folder / "Notes.json").write_text("mine", encoding="utf-8")  # not to be overwritten
    assert w.export_all(folder) == 3
    assert sorted(p.name for p in folder.iterdir()) == [
        "Notes-2.json",
        "Notes-3.json",
        "Notes.json",
        "Trip-to-Lisbon.json",
    ]
    assert (folder / "Notes.json").read_text(encoding="utf-8") == "mine"
    assert w.toast.text() == f"Exported 3 chats to {folder}"
    fresh = Store(tmp_path / "other.sqlite3")
    for path in sorted(folder.glob("*.json")):
        if path.name != "Notes.json":
            chat = read_export(path)
            fresh.add_conversation(chat.title, chat.settings_json, chat.messages, chat.created_at)
    assert sorted(c.title for c in fresh.conversations()) == sorted(c.title for c in w.store.conversations())
    trip = next(c for c in fresh.conversations() if c.title == "Trip to Lisbon")
    assert [m.content for m in fresh.messages(trip.id)] == ["Where to go?", "Porto.", "And in winter?", "Madei"]
    fresh.close()


@pytest.mark.qt
@pytest.mark.timeout(60)
def test_export_all_on_a_full_disk_says_how_many_were_written(qtbot, quiet_window, small_disk):
    from conftest import fill_disk

    w = quiet_window
    for number in range(3):
        w.store.add_message(w.store.create_conversation(f"Chat {number}"), "user", "x" * 2000)
    filler = fill_disk(small_disk)
    try:
        assert w.export_all(small_disk) == 0
        assert w.toast.text().startswith(f"Exported 0 of the chats to {small_disk}, then could not write Chat-2.json:")
    finally:
        filler.unlink()
    assert not [p for p in small_disk.iterdir() if p.suffix == ".json"]  # nothing half-written left
