"""The app's side of issue 24's hardening: settings.json (which holds the API key) is readable by its user
only, and the API server's allowed web origins are a setting: refused by default, served with CORS when
listed (a real window offscreen sharing a real engine process with the server)."""

from __future__ import annotations

import dataclasses
import json
import stat
import urllib.error
import urllib.request

import pytest

pytest.register_assert_rewrite("app_fixtures")
from app_fixtures import screenshot, tiny_settings  # noqa: E402

pytest_plugins = ["app_fixtures"]  # fixtures: app_paths, session_bridge, session_tiny_models

pytestmark = [pytest.mark.qt, pytest.mark.timeout(300)]

KEY = "sk-app-origins"
PAGE = "http://localhost:3000"


def test_settings_are_written_for_their_user_only(tmp_path):
    from app.settings.schema import AppSettings, load_settings, save_settings

    path = tmp_path / "settings.json"
    path.write_text("{}")
    path.chmod(0o644)  # a file from an older version, readable by everyone
    save_settings(AppSettings(api_server_key="sk-secret"), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_settings(path).api_server_key == "sk-secret"


def test_the_settings_row_takes_allowed_origins_and_explains_a_bad_one(qtbot, session_tiny_models):
    from app.settings.settings_page import SettingsPage

    dialog = SettingsPage(tiny_settings(*session_tiny_models))
    qtbot.addWidget(dialog)
    row = dialog.api_server
    row.enabled.setChecked(True)
    row.origins.setText("localhost:3000")
    assert "is not a web origin" in row.origins_problem.text()
    row.origins.setText(f"{PAGE}, https://chat.example.com")
    assert row.origins_problem.text() == ""
    dialog.show()
    screenshot(dialog, "settings_api_server_origins")
    assert dialog.values().api_server_allowed_origins == f"{PAGE}, https://chat.example.com"


def _get_models(url: str, origin: str) -> tuple[int, str | None]:
    request = urllib.request.Request(url + "/models", headers={"Authorization": f"Bearer {KEY}", "Origin": origin})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers.get("Access-Control-Allow-Origin")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())["error"]["code"]


@pytest.mark.slow
def test_the_app_server_refuses_web_pages_unless_allowed(qtbot, app_paths, session_bridge, session_tiny_models):
    from app.window.main_window import MainWindow

    settings = dataclasses.replace(
        tiny_settings(*session_tiny_models), api_server=True, api_server_port=0, api_server_key=KEY
    )
    window = MainWindow(paths=app_paths, settings=settings, bridge=session_bridge, confirm_delete=False)
    qtbot.addWidget(window)
    assert _get_models(window.api_server.url, PAGE) == (403, "origin_not_allowed")  # none allowed by default
    window.apply_settings(dataclasses.replace(settings, api_server_allowed_origins=PAGE))
    assert _get_models(window.api_server.url, PAGE) == (200, PAGE)
    assert _get_models(window.api_server.url, "https://evil.example") == (403, "origin_not_allowed")
