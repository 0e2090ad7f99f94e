"""App settings (typed schema on disk, migrations, defaults) and the user folders. No Qt, no engine."""

from __future__ import annotations

import json

from app.system.paths import AppPaths
from app.settings.schema import (
    SETTINGS_SCHEMA_VERSION,
    AppSettings,
    BudgetMode,
    ConversationSettings,
    Method,
    Offload,
    Theme,
    load_settings,
    save_settings,
)
from core.engine import protocol as P


def test_settings_round_trip_with_enums_stored_as_strings(tmp_path):
    path = tmp_path / "settings.json"
    settings = AppSettings(
        target="/models/llama-70b",
        draft="/models/llama-1b",
        offload=Offload.ON,
        vram_budget_gb=11.5,
        theme=Theme.DARK,
        tree_budget=256,
        engine_threads=3,
        defaults=ConversationSettings(
            system_prompt="Be brief.",
            temperature=0.2,
            top_p=0.8,
            max_tokens=99,
            budget_mode=BudgetMode.MANUAL,
            budget=64,
        ),
    )
    save_settings(settings, path)
    data = json.loads(path.read_text())
    assert data["schema_version"] == SETTINGS_SCHEMA_VERSION
    assert (data["offload"], data["theme"], data["defaults"]["budget_mode"]) == ("on", "dark", "manual")
    assert load_settings(path) == settings
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]  # written atomically, no temporary left


def test_first_run_defaults_load_the_builtin_pair(tmp_path):
    settings = load_settings(tmp_path / "missing.json")
    assert settings == AppSettings()
    load = settings.load_request()
    assert (load.target, load.draft, load.offload, load.vram_budget_gb) == ("builtin", "builtin-draft", "auto", None)
    assert P.validate(load) is load and settings.defaults.decoding_method(has_draft=True) == "auto"
    assert load.budget == "auto" and AppSettings(tree_budget=64).load_request().budget == 64
    assert ConversationSettings(method=Method.SPECEXEC).decoding_method(has_draft=True) == "specexec"
    assert AppSettings(draft="").load_request().draft is None
    assert ConversationSettings().decoding_method(has_draft=False) == "sequential"


def test_version_1_settings_are_migrated(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"schema_version": 1, "model": "/m/big", "draft_model": "/m/small", "dark_mode": True}))
    settings = load_settings(path)
    assert (settings.target, settings.draft, settings.theme, settings.schema_version) == (
        "/m/big",
        "/m/small",
        Theme.DARK,
        SETTINGS_SCHEMA_VERSION,
    )


def test_bad_values_fall_back_to_defaults_field_by_field(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps(
            {
                "schema_version": SETTINGS_SCHEMA_VERSION,
                "target": "/m/x",
                "offload": "sometimes",
                "theme": 3,
                "tree_budget": "lots",
                "vram_budget_gb": 8,
                "unknown_key": 1,
                "defaults": {"temperature": "hot", "max_tokens": 10, "top_p": float("nan")},
            }
        )
    )
    settings = load_settings(path)
    assert (settings.target, settings.offload, settings.theme, settings.tree_budget, settings.vram_budget_gb) == (
        "/m/x",
        Offload.AUTO,
        Theme.SYSTEM,
        0,
        8.0,
    )  # tree budget 0: automatic
    assert (settings.defaults.temperature, settings.defaults.max_tokens, settings.defaults.top_p) == (0.7, 10, 0.9)
    path.write_text('{"vram_budget_gb": Infinity, "defaults": {"temperature": -Infinity}}')  # json.dumps writes these
    settings = load_settings(path)
    assert (settings.vram_budget_gb, settings.defaults.temperature) == (0.0, 0.7)  # defaults, not a load error
    path.write_text(f'{{"vram_budget_gb": 4, "defaults": {{"temperature": {10**400}, "top_p": 0.5}}}}')
    settings = load_settings(path)  # a whole number beyond any float's range was an OverflowError
    assert (settings.vram_budget_gb, settings.defaults.temperature, settings.defaults.top_p) == (4.0, 0.7, 0.5)
    assert ConversationSettings(temperature=9, top_p=0, max_tokens=0, budget=-1).validated() == ConversationSettings(
        temperature=2.0, top_p=0.01, max_tokens=1, budget=1
    )


def test_a_damaged_settings_file_is_said_in_the_log_in_a_few_words(tmp_path, caplog):
    """A value a megabyte long, a theme that is a list, and thousands of unknown keys: each is said shortly (the
    log is read by people and sent with bug reports), with the choices a setting has."""
    path = tmp_path / "settings.json"
    unknown = {f"key{index}": index for index in range(5000)}
    path.write_text(json.dumps({"target": 5, "offload": "x" * 1_000_000, "theme": ["dark"], **unknown}))
    with caplog.at_level("INFO", logger="app.settings.schema"):
        settings = load_settings(path)
    assert (settings.target, settings.offload, settings.theme) == ("builtin", Offload.AUTO, Theme.SYSTEM)
    said = [record.getMessage() for record in caplog.records]
    assert all(len(message) < 300 for message in said), said

    def line(start: str) -> str:
        return next(message for message in said if message.startswith(start))

    assert "expected one of auto, on, off" in line("setting AppSettings.offload=")
    assert "expected one of system, light, dark" in line("setting AppSettings.theme=")
    assert "expected text" in line("setting AppSettings.target=")
    assert line("ignoring 5000 unknown settings of AppSettings")


def test_broken_settings_file_is_set_aside(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text("{not json")
    assert load_settings(path) == AppSettings()
    assert path.with_name("settings.json.broken").read_text() == "{not json"


def test_data_dir_env_var_moves_data_config_and_logs(tmp_path):
    paths = AppPaths.from_env({"SPECEXEC_DATA_DIR": str(tmp_path / "d")}).ensure()
    assert paths.database == tmp_path / "d" / "conversations.sqlite3"
    assert paths.settings_file == tmp_path / "d" / "config" / "settings.json"
    assert paths.log_file.parent == tmp_path / "d" / "logs" and paths.log_dir.is_dir()
    default = AppPaths.from_env({})
    assert all("SpecExec Desktop" in str(p) for p in (default.data_dir, default.config_dir, default.log_dir))


def test_the_models_folder_setting_moves_where_models_are_looked_for_unless_set_from_outside(
    models_folder_unset, tmp_path, monkeypatch
):
    """The Settings' models folder is put in force through SPECEXEC_MODELS_DIR (what every search for models
    and every process the app starts reads); a folder given through that variable before the app started wins;
    a folder that cannot be written, a file or a relative path is said before it is saved."""
    import os

    from app.system.models_folder import apply_models_folder, folder_problem, set_outside
    from core.system.env import MODELS_DIR_ENV, MODELS_DIR_FROM_SETTINGS_ENV
    from core.system.locations import default_models_dir, models_dir

    monkeypatch.setenv("SPECEXEC_DATA_DIR", str(tmp_path / "data"))
    assert models_dir() == default_models_dir() == tmp_path / "data" / "models" and set_outside() is None
    apply_models_folder(str(tmp_path / "big-drive" / "models"))
    assert models_dir() == tmp_path / "big-drive" / "models" and set_outside() is None
    apply_models_folder(str(tmp_path / "other"))  # the app's own setting may be changed again
    assert models_dir() == tmp_path / "other"
    apply_models_folder("")  # back to the default
    assert models_dir() == default_models_dir() and os.environ[MODELS_DIR_ENV] == str(default_models_dir())
    for damaged in ("models\0x", "relative/models"):  # a settings file edited by hand: the default, no crash
        apply_models_folder(damaged)
        assert models_dir() == default_models_dir()
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path / "portable"))  # set before the app started (a new app run)
    monkeypatch.delenv(MODELS_DIR_FROM_SETTINGS_ENV)
    assert set_outside() == str(tmp_path / "portable")
    apply_models_folder(str(tmp_path / "ignored"))
    assert models_dir() == tmp_path / "portable"

    assert folder_problem("") is None
    assert folder_problem(str(tmp_path / "new" / "models")) is None and (tmp_path / "new" / "models").is_dir()
    assert not any((tmp_path / "new" / "models").iterdir())  # the write check leaves nothing behind
    assert "not a whole path" in folder_problem("models")
    (tmp_path / "a-file").write_text("")
    assert "is a file, not a folder" in folder_problem(str(tmp_path / "a-file"))
    assert "pick another folder" in folder_problem(str(tmp_path / "a-file" / "models"))


def test_the_models_folder_is_kept_in_the_settings_file(tmp_path):
    path = tmp_path / "settings.json"
    save_settings(AppSettings(models_folder="/media/big/models"), path)
    assert load_settings(path).models_folder == "/media/big/models"
    path.write_text(json.dumps({"schema_version": SETTINGS_SCHEMA_VERSION, "models_folder": ["not", "text"]}))
    assert load_settings(path).models_folder == ""  # a hostile value: the default


def test_models_moved_into_the_new_models_folder_are_followed(tmp_path):
    """After picking another models folder people move their model folders there (README says so): the
    settings' model and draft are found again by their folder's name (a .gguf file by its folder's)."""
    import dataclasses

    from app.models.choice import follow_models_folder, moved_into

    root = tmp_path / "new"
    (root / "org--target").mkdir(parents=True)
    (root / "my-gguf").mkdir()
    (root / "my-gguf" / "model.gguf").write_bytes(b"GGUF")
    (tmp_path / "still-here").mkdir()
    assert moved_into(str(tmp_path / "old" / "org--target"), root) == str(root / "org--target")
    assert moved_into(str(tmp_path / "old" / "my-gguf" / "model.gguf"), root) == str(root / "my-gguf" / "model.gguf")
    for unchanged in ("builtin", "builtin-draft", "", "org/repo-id", str(tmp_path / "still-here"), "/gone/nowhere"):
        assert moved_into(unchanged, root) == unchanged
    settings = AppSettings(target=str(tmp_path / "old" / "org--target"), draft="builtin-draft")
    followed = follow_models_folder(settings, root)
    assert followed == dataclasses.replace(settings, target=str(root / "org--target"))
    assert follow_models_folder(followed, root) is followed  # nothing to follow: the same settings


def test_at_start_the_models_folder_is_in_force_and_the_moved_model_followed(
    models_folder_unset, tmp_path, monkeypatch
):
    """The app's start (app.first_run.settings_at_start): the saved models folder is where models are looked
    for, and a model in use whose folder was moved into it (with the app closed, as README says) is found."""
    from app.first_run import settings_at_start
    from core.system.locations import models_dir

    paths = AppPaths.from_env({"SPECEXEC_DATA_DIR": str(tmp_path / "data")}).ensure()
    new_folder = tmp_path / "big" / "models"
    (new_folder / "org--target").mkdir(parents=True)  # moved here from the data folder's models/
    old_target = str(tmp_path / "data" / "models" / "org--target")
    save_settings(AppSettings(target=old_target, draft="", models_folder=str(new_folder)), paths.settings_file)
    settings, moved = settings_at_start(paths)
    assert moved and settings.target == str(new_folder / "org--target") and models_dir() == new_folder
    save_settings(settings, paths.settings_file)
    assert settings_at_start(paths) == (settings, False)  # nothing more to follow
