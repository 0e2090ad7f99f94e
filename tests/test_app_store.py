"""The conversation store (SQLite): schema versions and migration, crash recovery, search. No Qt, no engine."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from app.conversations import store as S
from app.conversations.store import Store, StoreError


def test_new_database_is_at_the_current_schema_and_round_trips(tmp_path):
    store = Store(tmp_path / "c.sqlite3")
    assert S.schema_version(store.db) == S.SCHEMA_VERSION == len(S.MIGRATIONS)
    cid = store.create_conversation("Hi", '{"temperature": 0.5}')
    user = store.add_message(cid, "user", "hello")
    answer = store.add_message(cid, "assistant", "", S.STREAMING)
    store.update_message(answer.id, content="partial")
    store.update_message(answer.id, content="partial answer", status=S.COMPLETE, stats={"tokens": 3})
    assert [(m.role, m.content, m.status, m.stats) for m in store.messages(cid)] == [
        ("user", "hello", S.COMPLETE, {}),
        ("assistant", "partial answer", S.COMPLETE, {"tokens": 3}),
    ]
    assert store.message(user.id).content == "hello"
    assert store.conversation(cid).settings_json == '{"temperature": 0.5}'
    store.close()


def test_a_branch_holds_the_chat_as_shown_up_to_its_answer_and_leaves_the_chat_as_it_was(tmp_path):
    """Branch in new chat: the turns up to the answer, each with the answer on screen (not its alternatives),
    thinking, tool calls, stats and statuses kept, and the chat's settings; nothing of the chat changes."""
    store = Store(tmp_path / "c.sqlite3")
    cid = store.create_conversation("Trip", '{"temperature": 0.3}')
    store.add_message(cid, "user", "Where to go?")
    first = store.add_message(cid, "assistant", "Lisbon.")
    second = store.add_alternative(first.id)  # regenerated: the second answer is on screen
    rounds = [{"content": "", "calls": [{"id": "c1", "name": "weather", "arguments": {}, "result": "sun"}]}]
    store.update_message(
        second.id, content="Porto.", status=S.STOPPED, stats={"tokens": 2}, reasoning="Hmm.", tool_rounds=rounds
    )
    store.add_message(cid, "user", "And in winter?")
    store.add_message(cid, "assistant", "Madeira.")
    before = [(m.id, m.content, m.alt_count) for m in store.messages(cid)]
    branch = store.branch_conversation(second.id, "Trip (branch)")
    assert (store.conversation(branch).title, store.conversation(branch).settings_json) == (
        "Trip (branch)",
        '{"temperature": 0.3}',
    )
    copied = store.messages(branch)
    assert [(m.role, m.content, m.status, m.alt_count) for m in copied] == [
        ("user", "Where to go?", S.COMPLETE, 1),
        ("assistant", "Porto.", S.STOPPED, 1),
    ]
    assert (copied[1].reasoning, copied[1].tool_rounds, copied[1].stats) == ("Hmm.", rounds, {"tokens": 2})
    assert [(m.id, m.content, m.alt_count) for m in store.messages(cid)] == before  # the chat as it was
    assert store.conversations()[0].id == branch  # the newest chat
    with pytest.raises(ValueError, match="does not exist"):
        store.branch_conversation(9999, "x")
    store.close()


def test_a_damaged_tool_call_row_shows_the_calls_that_are_whole(tmp_path):
    """A row edited by hand or cut by a broken disk: the calls keyed by id and named keep showing, the rest are
    left out (the chat view keys its cards by id: a call without one stopped the chat from opening)."""
    store = Store(tmp_path / "c.sqlite3")
    cid = store.create_conversation("Tools")
    answer = store.add_message(cid, "assistant", "done")
    whole = {"id": "call_1", "name": "add", "arguments": {"a": 2}, "result": "5", "status": "done"}
    store.db.execute(
        "UPDATE messages SET tool_rounds = ? WHERE id = ?",
        (
            json.dumps(
                [{"content": "x", "calls": [{"name": "add"}, 5, whole, {"id": 7, "name": "add"}]}, 3, {"calls": "all"}]
            ),
            answer.id,
        ),
    )
    store.db.commit()
    assert store.message(answer.id).tool_rounds == [{"content": "x", "calls": [whole]}, {"calls": []}]
    store.close()


def make_v1_database(path) -> None:
    """A database as schema version 1 wrote it (no status / stats / settings / updated_at)."""
    db = S.connect(path)
    S.migrate(db, target=1)
    db.execute("INSERT INTO conversations (title, created_at) VALUES ('Old chat', 100.0)")
    db.execute("INSERT INTO messages (conversation_id, role, content, created_at) VALUES (1, 'user', 'hi', 101.0)")
    db.execute(
        "INSERT INTO messages (conversation_id, role, content, created_at) VALUES (1, 'assistant', 'hello!', 102.0)"
    )
    db.close()


def test_version_1_database_is_migrated_keeping_its_data_and_a_backup(tmp_path):
    path = tmp_path / "c.sqlite3"
    make_v1_database(path)
    store = Store(path)
    assert S.schema_version(store.db) == S.SCHEMA_VERSION
    (conversation,) = store.conversations()
    assert (conversation.title, conversation.created_at, conversation.updated_at, conversation.settings_json) == (
        "Old chat",
        100.0,
        100.0,
        "{}",
    )
    assert [(m.role, m.content, m.status, m.stats) for m in store.messages(conversation.id)] == [
        ("user", "hi", S.COMPLETE, {}),
        ("assistant", "hello!", S.COMPLETE, {}),
    ]
    assert store.db.execute("SELECT name FROM sqlite_master WHERE name='messages_by_conversation'").fetchone()
    store.add_message(conversation.id, "user", "new", S.COMPLETE)  # the new columns work
    store.close()
    backup = tmp_path / "c.sqlite3.v1.bak"
    assert backup.exists()
    old = sqlite3.connect(backup)
    assert S.schema_version(old) == 1 and old.execute("SELECT count(*) FROM messages").fetchone() == (2,)
    old.close()


def test_failed_migration_step_leaves_the_previous_version(tmp_path, monkeypatch):
    path = tmp_path / "c.sqlite3"
    make_v1_database(path)

    def broken(db):
        db.execute("ALTER TABLE conversations ADD COLUMN updated_at REAL NOT NULL DEFAULT 0")
        raise sqlite3.OperationalError("disk on fire")

    monkeypatch.setitem(S.MIGRATIONS, 1, broken)
    with pytest.raises(StoreError, match="disk on fire"):
        Store(path)
    db = sqlite3.connect(path)
    assert S.schema_version(db) == 1
    assert "updated_at" not in [row[1] for row in db.execute("PRAGMA table_info(conversations)")]
    db.close()


def test_database_from_a_newer_version_is_refused_untouched(tmp_path):
    path = tmp_path / "c.sqlite3"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE schema_version SET version = 99")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="newer"):
        Store(path)
    db = sqlite3.connect(path)
    assert S.schema_version(db) == 99
    db.close()


def test_answer_cut_off_by_a_crash_is_kept_and_marked_interrupted(tmp_path):
    path = tmp_path / "c.sqlite3"
    store = Store(path)
    cid = store.create_conversation()
    store.add_message(cid, "user", "hi")
    answer = store.add_message(cid, "assistant", "", S.STREAMING)
    store.update_message(answer.id, content="half an ans")  # the last periodic save before the crash
    del store  # no close, no final write: the app died

    again = Store(path)
    assert again.recovered == 1
    assert (again.message(answer.id).content, again.message(answer.id).status) == ("half an ans", S.INTERRUPTED)
    again.close()


def test_search_matches_titles_and_message_text_and_escapes_wildcards(tmp_path):
    store = Store(tmp_path / "c.sqlite3")
    a = store.create_conversation("Python sorting")
    b = store.create_conversation("Travel")
    store.add_message(b, "user", "Best trains in 100% Switzerland?")
    c = store.create_conversation("Empty")
    assert {x.id for x in store.conversations()} == {a, b, c}
    assert [x.id for x in store.conversations("python")] == [a]
    assert [x.id for x in store.conversations("TRAINS")] == [b]
    assert [x.id for x in store.conversations("100%")] == [b]
    assert [x.id for x in store.conversations("%")] == [b]  # a literal %, not "anything"
    assert store.conversations("_") == []
    store.close()


def test_delete_from_a_message_and_delete_a_conversation(tmp_path):
    store = Store(tmp_path / "c.sqlite3")
    cid = store.create_conversation()
    ids = [
        store.add_message(cid, role, text).id
        for role, text in (("user", "1"), ("assistant", "2"), ("user", "3"), ("assistant", "4"))
    ]
    store.delete_messages_from(cid, ids[2])
    assert [m.content for m in store.messages(cid)] == ["1", "2"]
    store.rename_conversation(cid, "Renamed")
    assert store.conversation(cid).title == "Renamed"
    store.delete_conversation(cid)
    assert store.conversation(cid) is None and store.messages(cid) == []
    store.close()


def test_version_2_database_is_migrated_and_regenerated_answers_are_kept_as_alternatives(tmp_path):
    path = tmp_path / "c.sqlite3"
    db = S.connect(path)
    S.migrate(db, target=2)  # a database as the app before alternatives wrote it
    db.execute("INSERT INTO conversations (title, created_at, updated_at) VALUES ('Old', 1.0, 1.0)")
    db.execute("INSERT INTO messages (conversation_id, role, content, created_at) VALUES (1, 'user', 'hi', 2.0)")
    db.execute(
        "INSERT INTO messages (conversation_id, role, content, created_at, status) "
        "VALUES (1, 'assistant', 'first', 3.0, 'complete')"
    )
    db.close()
    store = Store(path)
    assert S.schema_version(store.db) == S.SCHEMA_VERSION and (tmp_path / "c.sqlite3.v2.bak").exists()
    user, first = store.messages(1)
    assert (first.content, first.alt_index, first.alt_count) == ("first", 0, 1)
    second = store.add_alternative(first.id)
    store.update_message(second.id, content="second", status=S.COMPLETE)
    third = store.add_alternative(first.id)
    assert [m.id for m in store.messages(1)] == [user.id, third.id]  # one answer on screen per turn
    assert (third.alt_index, third.alt_count) == (2, 3) and store.alternatives(second.id) == [
        first.id,
        second.id,
        third.id,
    ]
    store.show_alternative(second.id)
    shown = store.messages(1)[-1]
    assert (shown.content, shown.alt_index, shown.alt_count) == ("second", 1, 3)
    store.delete_messages_from(1, first.id)  # edit-and-resend of the user message drops every alternative
    assert [m.id for m in store.messages(1)] == [user.id] and store.alternatives(third.id) == []
    store.close()


OLD_CHATS = Path(__file__).parent / "fixtures" / "chats" / "chats-v3.sqlite3"


def test_a_real_version_3_database_opens_with_its_chats_and_gains_room_for_thinking(tmp_path):
    """tests/fixtures/chats/chats-v3.sqlite3 was written by the app before thinking was stored (its
    app/conversations/store.py at commit 5b80967, schema 3): two chats, a regenerated answer kept as an
    alternative, a stopped answer, one cut off mid-answer (still "streaming"), per-chat settings, stats."""
    path = tmp_path / "chats.sqlite3"
    shutil.copyfile(OLD_CHATS, path)
    store = Store(path)
    assert S.schema_version(store.db) == S.SCHEMA_VERSION == 6 and (tmp_path / "chats.sqlite3.v3.bak").exists()
    assert store.recovered == 1  # the answer cut off mid-stream: kept, marked interrupted
    poem, capitals = store.conversations()
    assert (capitals.title, json.loads(capitals.settings_json)["system_prompt"]) == (
        "Capital of France",
        "Answer briefly.",
    )
    shown = store.messages(capitals.id)
    assert [(m.role, m.content, m.status, m.reasoning) for m in shown] == [
        ("user", "What is the capital of France?", S.COMPLETE, ""),
        ("assistant", "The capital of France is Paris.", S.COMPLETE, ""),
        ("user", "And of Italy?", S.COMPLETE, ""),
        ("assistant", "Rome", S.STOPPED, ""),
    ]
    assert (shown[1].alt_index, shown[1].alt_count, shown[1].stats["tokens_per_s"]) == (1, 2, 12.0)
    assert [m.content for m in map(store.message, store.alternatives(shown[1].id))] == [
        "Paris.",
        "The capital of France is Paris.",
    ]
    assert [(m.content, m.status) for m in store.messages(poem.id)][1] == ("Waves fold into foam", S.INTERRUPTED)
    answer = store.add_alternative(shown[3].id)  # a thinking model answers the old chat: its thinking is kept
    store.update_message(
        answer.id, reasoning="Italy's capital...", content="Rome.", status=S.COMPLETE, stats={"thinking_seconds": 4.2}
    )
    store.close()
    store = Store(path)
    last = store.messages(capitals.id)[-1]
    assert (last.reasoning, last.content, last.stats, last.alt_count) == (
        "Italy's capital...",
        "Rome.",
        {"thinking_seconds": 4.2},
        2,
    )
    assert all(m.tool_rounds == [] for m in store.messages(capitals.id))  # schema 5: no calls in old answers
    assert not poem.pinned and not capitals.pinned  # schema 6: no chat was pinned
    store.set_pinned(capitals.id, True)
    assert [c.title for c in store.conversations()] == ["Capital of France", poem.title]
    store.close()
    old = sqlite3.connect(tmp_path / "chats.sqlite3.v3.bak")  # the backup is the untouched old file
    assert S.schema_version(old) == 3 and "reasoning" not in [c[1] for c in old.execute("PRAGMA table_info(messages)")]
    old.close()
