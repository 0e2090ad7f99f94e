"""The app's side of the automatic method and budget: settings files of schema 2 migrate to 'auto', and
the status bar shows the engine's AutoChoice in one line."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("PySide6")

from app.settings.schema import SETTINGS_SCHEMA_VERSION, AppSettings, ConversationSettings, Method, load_settings  # noqa: E402
from app.window.status_bar import StatusPanel  # noqa: E402
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


def test_status_bar_shows_the_choice_in_one_line(qtbot):
    bridge = recording_bridge_class()()
    panel = StatusPanel(bridge, AnswerStats())
    qtbot.addWidget(panel)
    panel.show()
    assert panel.choice_label.text() == ""
    reason = "SpecExec, 256-token trees: ~5.7 tokens per 2.1 s pass (2.7x plain decoding)"
    bridge.handle_events([P.AutoChoice("a1", "specexec", 256, 32, reason, 5.7, 2.1)])
    assert panel.choice_label.text() == "SpecExec, 256-token trees: ~5.7 tokens per 2.1 s pass"
    assert reason in panel.choice_label.toolTip()  # the details one hover away
    screenshot(panel, "autotune-status-specexec")
    plain = "plain decoding: on this CPU a speculative pass costs more than it saves (~4.3 tokens per 1.2 s pass vs 61 ms per token)"
    bridge.handle_events([P.AutoChoice("a1", "sequential", 0, 0, plain)])
    assert panel.choice_label.text() == "plain decoding: on this CPU a speculative pass costs more than it saves"
    screenshot(panel, "autotune-status-plain")
