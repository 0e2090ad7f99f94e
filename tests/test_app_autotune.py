"""The app's side of the automatic method and budget: settings files of schema 2 migrate to 'auto', and
the speed details (one click from the status bar) say what the engine chose and why."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("PySide6")

from app.settings.schema import SETTINGS_SCHEMA_VERSION, ConversationSettings, Method, load_settings  # noqa: E402
from app.window.status_bar import SpeedDetails  # noqa: E402
from app.chat.answer_stats import AnswerStats  # noqa: E402
from app_fixtures import recording_bridge_class, screenshot  # noqa: E402
from core.engine import protocol as P  # noqa: E402


def test_schema_2_settings_move_to_the_automatic_budget(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"schema_version": 2, "target": "/m/big", "tree_budget": 128}))
    old_default = load_settings(path)
    assert old_default.tree_budget == 0 and old_default.defaults.method == Method.AUTO
    assert old_default.load_request().budget == "auto"
    assert old_default.defaults.decoding_method(has_draft=True) == "auto"
    assert old_default.target == "/m/big" and old_default.schema_version == SETTINGS_SCHEMA_VERSION
    path.write_text(json.dumps({"schema_version": 2, "tree_budget": 512}))
    chosen = load_settings(path)
    assert chosen.tree_budget == 512 and chosen.load_request().budget == 512  # a user's own value stays
    path.write_text(json.dumps({"schema_version": 3, "defaults": {"method": "fastest"}}))
    assert load_settings(path).defaults.method == Method.AUTO  # unknown value: the default
    assert ConversationSettings(method=Method.SPECEXEC).decoding_method(has_draft=False) == "sequential"


def test_speed_details_say_what_was_chosen_and_why(qtbot):
    bridge = recording_bridge_class()()
    details = SpeedDetails(bridge, AnswerStats())
    qtbot.addWidget(details)
    details.show()
    assert details.choice_label.text() == "" and not details.choice_label.isVisible()
    reason = "SpecExec, 256-token trees: ~5.7 tokens per 2.1 s pass (2.7x plain decoding)"
    bridge.handle_events([P.AutoChoice("a1", "specexec", 256, 32, reason, 5.7, 2.1)])
    assert details.choice_label.isVisible() and reason in details.choice_label.text()  # whole, wrapped
    screenshot(details, "autotune-details-specexec")
    plain = "plain decoding: on this CPU a speculative pass costs more than it saves (~4.3 tokens per 1.2 s pass vs 61 ms per token)"
    bridge.handle_events([P.AutoChoice("a1", "sequential", 0, 0, plain)])
    assert plain in details.choice_label.text() and details.choice_label.isVisible()  # why there is no tree
    screenshot(details, "autotune-details-plain")
    details.set_uses_draft(False)  # no draft model at all: nothing was chosen
    assert not details.choice_label.isVisible() and not details.chart.isVisible()


def test_plain_decoding_gets_a_sentence_in_place_of_a_flat_chart(qtbot):
    """One token a pass draws a row of equal bars that says nothing: the card says what happened instead."""
    bridge = recording_bridge_class()()
    stats = AnswerStats()
    details = SpeedDetails(bridge, stats)
    qtbot.addWidget(details)
    details.show()
    assert details.chart.isVisible() and not details.plain_label.isVisible()
    bridge.handle_events([P.AutoChoice("a1", "sequential", 0, 0, "plain decoding: faster here")])
    for _ in range(6):
        stats.add(P.PassStats("a1", 1, 0, 0.0, 40.0, 25.0, 1))  # the automatic method's plain passes
    stats.flush()
    assert not details.chart.isVisible() and not details.per_pass_label.isVisible()
    assert details.plain_label.isVisible() and "one token per pass" in details.plain_label.text()
    assert details.choice_label.isVisible()  # and why plain decoding was chosen
    screenshot(details, "speed-details-plain")
    stats.reset()  # the next answer: chosen again, a chart until the engine says otherwise
    assert details.chart.isVisible() and not details.plain_label.isVisible()
    details.set_uses_draft(False)
    assert details.plain_label.isVisible() and "without a draft model" in details.plain_label.text()
