"""The first-run wizard and the model manager, driven like a user: hardware from a fixture, a catalog of a
tiny real model pair served by the loopback hub, a real download process, a real engine process.

Screenshots of every wizard page and of the model manager go to tests/artifacts/wizard-*.png.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from PySide6.QtWidgets import QWizard  # noqa: E402

from app.engine.bridge import READY, EngineBridge  # noqa: E402
from app.models.wizard.wizard import CHOOSE, DONE, DOWNLOAD, HARDWARE, FirstRunWizard  # noqa: E402
from core.models.catalog import load_catalog  # noqa: E402
from core.models.installed import scan_models  # noqa: E402

pytest.register_assert_rewrite("app_fixtures", "hub_server")
from app_fixtures import ENGINE_TIMEOUT_S, save_tiny_pair, screenshot, tiny_settings  # noqa: E402
from hub_server import payload  # noqa: E402

pytest_plugins = ["app_fixtures", "hub_server"]
pytestmark = [pytest.mark.qt, pytest.mark.timeout(240)]

FIXTURES = Path(__file__).parent / "fixtures" / "hw"
WAIT_MS = int(ENGINE_TIMEOUT_S * 1000)
PADDING = "padding.dat"  # makes the target big enough to close the app in the middle of its download


def _model_entry(repo: str, folder: Path) -> dict:
    config = json.loads((folder / "config.json").read_text())
    shape = {
        key: config[key]
        for key in (
            "model_type",
            "num_hidden_layers",
            "hidden_size",
            "intermediate_size",
            "num_attention_heads",
            "num_key_value_heads",
            "vocab_size",
        )
    }
    shape["tie_word_embeddings"] = bool(config.get("tie_word_embeddings", False))
    size = sum(path.stat().st_size for path in folder.iterdir())
    return {
        "repo": repo,
        "revision": "main",
        "quantization": "fp32",
        "approx_bytes": size,
        "config": shape,
        "dtype": "float32",
    }


@pytest.fixture(scope="module")
def tiny_repo_files(tmp_path_factory):
    """The tiny pair's folders (real models the engine loads in about a second)."""
    target, draft = save_tiny_pair(tmp_path_factory.mktemp("wizard-models"))
    return Path(target), Path(draft)


@pytest.fixture()
def served(hub, hub_env, tiny_repo_files, tmp_path, monkeypatch):
    """The tiny pair on the loopback hub, a test catalog (built-in, the tiny pair, a 70B that cannot fit
    16 GB of RAM), and a CPU-only machine with 16 GB of RAM as the hardware."""
    target, draft = tiny_repo_files
    files = {path.name: path.read_bytes() for path in target.iterdir()}
    files[PADDING] = payload(6 << 20, seed=3)
    hub.add_repo("org/tiny-target", files)
    hub.add_repo("org/tiny-draft", {path.name: path.read_bytes() for path in draft.iterdir()})
    real = json.loads(Path("resources/catalog.json").read_text())
    builtin = next(pair for pair in real["pairs"] if pair["id"] == "builtin")
    huge = next(pair for pair in real["pairs"] if pair["id"] == "llama2-70b-chat-gptq")
    huge = {key: value for key, value in huge.items() if key != "role"}  # offered here (the calibration pair is not)
    tiny = {
        "id": "tiny",
        "name": "Tiny test pair",
        "summary": "Two random layers.",
        "licence": "MIT",
        "licence_url": "https://example.org/licence",
        "gated": False,
        "context_length": 4096,
        "min_ram_gb": 1,
        "min_vram_gb": 0,
        "target": _model_entry("org/tiny-target", target),
        "draft": _model_entry("org/tiny-draft", draft),
        "acceptance": {"source": "test", "tokens_per_pass": {"16": 3.0, "128": 4.0}},
    }
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps({"schema_version": 1, "pairs": [builtin, tiny, huge]}))
    monkeypatch.setenv("SPECEXEC_CATALOG", str(catalog))
    monkeypatch.setenv("SPECEXEC_HW_FIXTURE", str(FIXTURES / "gpu12-ram16-pcie3.json"))
    return hub_env


def tiny_bridge(settings) -> EngineBridge:
    from core.engine.client import EngineClient

    return EngineBridge(lambda: EngineClient(torch_threads=1, start_timeout=ENGINE_TIMEOUT_S))


def open_wizard(qtbot, served, **kwargs) -> FirstRunWizard:
    settings = tiny_settings("builtin", "builtin-draft")
    wizard = FirstRunWizard(settings, served.models_dir, make_bridge=tiny_bridge, **kwargs)
    qtbot.addWidget(wizard)
    wizard.show()
    qtbot.waitUntil(lambda: wizard.state.recommendation is not None, timeout=WAIT_MS)
    return wizard


def choose(wizard: FirstRunWizard, pair_id: str) -> None:
    wizard.choose_page.pairs.select(pair_id)


@pytest.mark.slow
def test_wizard_end_to_end_download_verify_load_answer(qtbot, served, app_paths):
    wizard = open_wizard(qtbot, served)
    assert wizard.currentId() == HARDWARE
    summary = wizard.hardware_page.summary.text()
    assert "NVIDIA GeForce RTX 3060, 12.0 GB" in summary and "15.5 GB RAM" in summary and "free on disk" in summary
    wizard.hardware_page.details_button.click()
    assert "Processor:" in wizard.hardware_page.details.toPlainText()
    screenshot(wizard, "wizard-1-computer")
    wizard.next()
    assert wizard.currentId() == CHOOSE
    ids = [fit.pair.id for fit in wizard.choose_page.pairs.fits]
    assert set(ids) == {"builtin", "tiny", "llama2-70b-chat-gptq"}
    assert wizard.state.recommendation.recommended == ids[0]  # the recommended pair comes first
    choose(wizard, "tiny")
    assert wizard.state.chosen.fit == "fits" and wizard.button(QWizard.WizardButton.NextButton).isEnabled()
    screenshot(wizard, "wizard-2-choose")
    wizard.next()
    assert wizard.currentId() == DOWNLOAD
    page = wizard.download_page
    qtbot.waitUntil(lambda: page.done or page.message.text() != "", timeout=WAIT_MS)
    assert page.done, page.message.text()
    assert page.bar.value() == 1000 and "checked" in page.detail.text()
    screenshot(wizard, "wizard-3-download")
    for name in ("org--tiny-target", "org--tiny-draft"):
        assert {m.name: m.complete for m in scan_models(served.models_dir)}[name] is True
    wizard.next()
    assert wizard.currentId() == DONE
    qtbot.waitUntil(wizard.done_page.isComplete, timeout=WAIT_MS)
    screenshot(wizard, "wizard-4-done")
    settings = wizard.chosen_settings
    assert settings.active_pair == "tiny" and settings.target == str(served.models_dir / "org--tiny-target")
    bridge = wizard.take_bridge()
    wizard.accept()
    try:
        from app.window.main_window import MainWindow

        window = MainWindow(app_paths, settings, bridge=bridge, confirm_delete=False)
        qtbot.addWidget(window)
        window.show()
        assert bridge.status.state == READY
        with qtbot.waitSignal(window.controller.answer_finished, timeout=WAIT_MS):
            window.send("w6 w7 w8")
        answers = [m for m in window.controller.messages.rows if m.role == "assistant"]
        assert answers and answers[-1].content.strip()
        window.close()
    finally:
        bridge.shutdown()


def test_real_catalog_on_a_24_gb_pc_in_plain_words(qtbot, tmp_path, monkeypatch):
    """The shipped catalog on an RTX 4090 / 64 GB / PCIe 4 machine (these screenshots go in the README)."""
    monkeypatch.delenv("SPECEXEC_CATALOG", raising=False)
    monkeypatch.setenv("SPECEXEC_HW_FIXTURE", str(FIXTURES / "gpu24-ram64-pcie4.json"))
    from app.settings.schema import AppSettings

    wizard = FirstRunWizard(AppSettings(), tmp_path / "models")  # the app's defaults (automatic budget)
    qtbot.addWidget(wizard)
    wizard.show()
    qtbot.waitUntil(lambda: wizard.state.recommendation is not None, timeout=WAIT_MS)
    assert (
        wizard.hardware_page.summary.text()
        == "NVIDIA GeForce RTX 4090, 24.0 GB; 62.7 GB RAM; PCIe 4.0 x16; 465.7 GB free on disk"
    )
    advice = wizard.hardware_page.advice.text()
    assert wizard.hardware_page.recommended_name.text() == "Llama 3.3 70B Instruct"  # the card's title
    assert advice.startswith("A very strong model") and "words per second" in advice
    for jargon in (
        "drafted",
        "tokens/pass",
        "tokens/s",
        "tree budget",
        "SpecExec paper",
        "4-bit",
    ):  # what a person gains, not how
        assert jargon not in advice
    wizard.hardware_page.details_button.click()
    assert "PCIe Gen4 x16" in wizard.hardware_page.details.toPlainText()
    screenshot(wizard, "wizard-1-computer-4090")
    wizard.next()
    first = wizard.choose_page.pairs.fits[0]
    assert first.pair.id == wizard.state.recommendation.recommended != "builtin"
    card = wizard.choose_page.pairs.itemWidget(wizard.choose_page.pairs.item(0))
    text = " ".join(label.text() for label in card.findChildren(type(card.mark)))
    assert "Recommended" in text and "Fits this computer" in text and "words per second" in text
    assert "to download" in text and "Licence:" in text
    # as `specexec models recommend` predicts (issue 37: the 4-bit draft priced at torch's int4 kernel's stated
    # default share until a card's own rates are measured, its time growing with the search's rows as an H100
    # measured; the overlap priced at what the CPU measured at budget 256: 2% of the drafting's forwards
    # spared, issue 39)
    assert "About 6 words per second" in text and "token" not in text  # the figure is a click away:
    assert "7.8 tokens per second" in card.toolTip()
    assert "drafted" not in text and "SpecExec paper" not in text  # the details are one click away:
    page = wizard.choose_page
    assert not page.details.isVisible()
    page.details_button.click()
    assert page.details.isVisible() and "drafted by" in page.details.text() and "tokens per pass" in page.details.text()
    assert "7.8 tokens per second" in page.details.text()
    # the context the fit was priced with, which the app keeps by default, not only the model's own limit
    assert "keeps 4,096 tokens of a chat in mind (the model reads up to 131,072" in page.details.text()
    assert "builtin" in [fit.pair.id for fit in wizard.choose_page.pairs.fits]  # always there, always fits
    assert next(f for f in wizard.choose_page.pairs.fits if f.pair.id == "builtin").fit == "fits"
    screenshot(wizard, "wizard-2-choose-4090")
    wizard.reject()


def test_a_drive_too_full_for_the_chosen_model_offers_another_drive(
    models_folder_unset, qtbot, tmp_path, monkeypatch, small_disk
):
    """On a 24 GB PC whose models' drive has 30 GB free, the 70B card says its 42 GB download would not fit
    and the page offers another folder: one that cannot be used is said, one on a roomy drive (a 100 GB tmpfs,
    allocated only as written) becomes the models folder, and the cards are worked out again with its space."""
    import subprocess

    from app.settings.schema import AppSettings
    from app.system.model_chooser import chosen_path
    from core.system.locations import models_dir

    monkeypatch.delenv("SPECEXEC_CATALOG", raising=False)
    hardware = json.loads((FIXTURES / "gpu24-ram64-pcie4.json").read_text())
    hardware["disk"]["free_bytes"] = 30 * 2**30
    (tmp_path / "hw.json").write_text(json.dumps(hardware))
    monkeypatch.setenv("SPECEXEC_HW_FIXTURE", str(tmp_path / "hw.json"))
    wizard = FirstRunWizard(AppSettings(), tmp_path / "models")
    qtbot.addWidget(wizard)
    wizard.show()
    qtbot.waitUntil(lambda: wizard.state.recommendation is not None, timeout=WAIT_MS)
    wizard.next()
    page = wizard.choose_page
    choose(wizard, "qwen3-32b-awq")  # 19 GB: room enough
    assert not page.move_button.isVisible()
    choose(wizard, "llama3.3-70b-instruct-awq")
    assert page.move_button.isVisible() and wizard.state.chosen.disk_ok is False
    screenshot(wizard, "wizard-2-choose-drive-too-full")

    def pick(folder: Path) -> None:
        dialog = page.folder_dialog()
        dialog.setDirectory(str(folder.parent))
        dialog.selectFile(str(folder))
        dialog.accept()
        assert chosen_path(dialog) == folder
        page.take_folder(dialog)

    (small_disk / "models").mkdir()  # 2 MB: a folder that can be written, on a drive far too small
    pick(small_disk / "models")
    assert wizard.state.chosen.disk_ok is False and page.move_button.isVisible()  # said again on its card
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    pick(small_disk / "models")
    assert page.note.text().startswith("Models cannot be kept there:") and "no permission" in page.note.text()
    roomy = tmp_path / "second-drive"
    roomy.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=100g", "tmpfs", str(roomy)], check=True)
    try:
        (roomy / "models").mkdir()
        pick(roomy / "models")
        assert wizard.state.models_dir == roomy / "models" == models_dir()
        assert wizard.state.settings.models_folder == str(roomy / "models")
        assert wizard.state.chosen.pair.id == "llama3.3-70b-instruct-awq" and wizard.state.chosen.disk_ok is True
        assert not page.move_button.isVisible() and f"Models will be kept in {roomy / 'models'}." in page.note.text()
        card = page.pairs.itemWidget(page.pairs.currentItem())
        assert "Drive too full" not in " ".join(label.text() for label in card.findChildren(type(card.mark)))
    finally:
        wizard.reject()
        subprocess.run(["umount", "-l", str(roomy)], check=True)


def test_a_download_that_finds_the_drive_full_says_so_and_back_shows_the_drive_as_it_is(
    models_folder_unset, qtbot, served, small_disk
):
    """The first look at the drive (the hardware fixture) found room; the real download into a 2 MB drive
    refuses the tiny pair's 6 MB before its first byte: the page says to free space or go Back for another
    drive, and Back shows the card as the drive really is, with that offer."""
    wizard = FirstRunWizard(tiny_settings("builtin", "builtin-draft"), small_disk / "models", make_bridge=tiny_bridge)
    qtbot.addWidget(wizard)
    wizard.show()
    qtbot.waitUntil(lambda: wizard.state.recommendation is not None, timeout=WAIT_MS)
    wizard.next()
    choose(wizard, "tiny")
    assert wizard.state.chosen.disk_ok is True and not wizard.choose_page.move_button.isVisible()
    wizard.next()
    assert wizard.currentId() == DOWNLOAD
    page = wizard.download_page
    qtbot.waitUntil(lambda: "not enough free disk space" in page.message.text(), timeout=WAIT_MS)
    assert "or go Back and keep models on another drive" in page.message.text()
    wizard.back()
    assert wizard.currentId() == CHOOSE and wizard.state.chosen.pair.id == "tiny"
    assert wizard.state.chosen.disk_ok is False and wizard.choose_page.move_button.isVisible()
    card = wizard.choose_page.pairs.itemWidget(wizard.choose_page.pairs.currentItem())
    assert "Drive too full" in " ".join(label.text() for label in card.findChildren(type(card.mark)))
    wizard.reject()


def test_a_models_folder_picked_in_a_cancelled_first_start_stays_picked(
    models_folder_unset, qtbot, tmp_path, monkeypatch, app_paths
):
    """The app looks in the folder from the moment it is picked, so cancelling the wizard keeps it saved too
    (else this run and the next would look in different folders)."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.first_run import before_main_window
    from app.settings.schema import AppSettings, load_settings

    monkeypatch.setenv("SPECEXEC_HW_FIXTURE", str(FIXTURES / "gpu24-ram64-pcie4.json"))
    picked = tmp_path / "elsewhere" / "models"

    def pick_then_cancel() -> None:
        wizard = QApplication.activeModalWidget()
        if not isinstance(wizard, FirstRunWizard):
            QTimer.singleShot(50, pick_then_cancel)
            return
        assert wizard.state.keep_models_in(picked) is None
        wizard.reject()

    QTimer.singleShot(50, pick_then_cancel)
    settings, bridge = before_main_window(app_paths, AppSettings(), tmp_path / "models")
    assert bridge is None and settings.target == "builtin" and settings.models_folder == str(picked)
    assert load_settings(app_paths.settings_file).models_folder == str(picked) and picked.is_dir()


def test_red_pair_needs_an_explicit_confirmation(qtbot, served):
    wizard = open_wizard(qtbot, served)
    wizard.next()
    choose(wizard, "llama2-70b-chat-gptq")
    fit = wizard.state.chosen
    assert fit.fit == "no" and "RAM" in fit.reason
    page = wizard.choose_page
    assert page.confirm_red.isVisible() and not page.isComplete()
    assert not wizard.button(QWizard.WizardButton.NextButton).isEnabled()
    screenshot(wizard, "wizard-2-choose-red")
    page.confirm_red.setChecked(True)
    assert page.isComplete() and wizard.button(QWizard.WizardButton.NextButton).isEnabled()
    choose(wizard, "builtin")  # another pair clears the confirmation
    choose(wizard, "llama2-70b-chat-gptq")
    assert not page.confirm_red.isChecked() and not page.isComplete()


@pytest.mark.slow
def test_closing_mid_download_then_resume_on_next_start(qtbot, served, hub):
    from app.models.choice import unfinished_pairs

    wizard = open_wizard(qtbot, served)
    hub.limit_rate(512 << 10)  # ~12 s for the padding file: time to pause, resume and close in its middle
    wizard.next()
    choose(wizard, "tiny")
    wizard.next()
    partial = served.models_dir / "org--tiny-target" / f"{PADDING}.incomplete"
    qtbot.waitUntil(lambda: partial.exists() and partial.stat().st_size > (512 << 10), timeout=WAIT_MS)
    page = wizard.download_page
    qtbot.waitUntil(lambda: "B/s ·" in page.detail.text(), timeout=WAIT_MS)
    assert " of " in page.detail.text() and "left" in page.detail.text()
    screenshot(wizard, "wizard-3-download-progress")
    page.pause_button.click()  # pause: the process stops, the partial file stays; resume goes on from it
    assert not page.worker.running and page.resume_button.isVisibleTo(page)
    paused_at = partial.stat().st_size
    page.resume_button.click()
    qtbot.waitUntil(lambda: partial.exists() and partial.stat().st_size > paused_at + (128 << 10), timeout=WAIT_MS)
    assert (PADDING, f"bytes={paused_at}-") in hub.requests
    wizard.close()  # closing the app: the download process stops, its partial files stay
    assert not wizard.download_page.worker.running
    kept = partial.stat().st_size
    assert kept > 0
    catalog = load_catalog()
    assert unfinished_pairs(catalog, served.models_dir) == ["tiny"]  # what the next start offers to resume

    hub.limit_rate(None)
    hub.reset_counters()
    again = open_wizard(qtbot, served, resume_pair="tiny")
    qtbot.waitUntil(lambda: again.currentId() == DOWNLOAD, timeout=WAIT_MS)
    page = again.download_page
    qtbot.waitUntil(lambda: page.done or page.message.text() != "", timeout=WAIT_MS)
    assert page.done, page.message.text()
    assert "already here from before" in page.log.toPlainText()
    assert (PADDING, f"bytes={kept}-") in hub.requests  # only the missing bytes were asked for
    assert unfinished_pairs(catalog, served.models_dir) == []
    again.reject()


@pytest.fixture()
def tiny_installed(served, tiny_repo_files):
    """The tiny pair already in the models folder, under the catalog's folder names (as if downloaded)."""
    import shutil

    target, draft = tiny_repo_files
    shutil.copytree(target, served.models_dir / "org--tiny-target")
    shutil.copytree(draft, served.models_dir / "org--tiny-draft")
    return served


@pytest.mark.slow
def test_manager_switch_pair_reloads_engine_and_keeps_conversations(
    qtbot, tiny_installed, tiny_repo_files, app_paths, tmp_path
):
    from app.window.main_window import MainWindow
    from app.system.model_chooser import chosen_path
    from app.conversations.store import Store

    models = tiny_installed.models_dir
    settings = dataclasses.replace(
        tiny_settings(str(models / "org--tiny-target"), str(models / "org--tiny-draft")), active_pair="tiny"
    )
    store = Store(app_paths.database)
    for title in ("Trip plans", "Recipes"):
        store.create_conversation(title)
    bridge = tiny_bridge(settings)
    window = MainWindow(app_paths, settings, store=store, bridge=bridge, confirm_delete=False)
    window.owns_bridge = True
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: bridge.status.state == READY, timeout=WAIT_MS)
    assert window.model_button.text().startswith("Tiny test pair")
    before = [c.title for c in window.controller.conversations.rows]

    manager = window.open_model_manager()
    qtbot.waitUntil(lambda: len(manager.entries) >= 2 and bool(manager.catalog_list.fits), timeout=WAIT_MS)
    keys = [entry.key for entry in manager.entries]
    assert keys[:2] == ["builtin", "tiny"]
    tiny_entry = manager.entries[1]
    assert tiny_entry.size_bytes > 0 and tiny_entry.location == str(models)

    # Import: a bad folder is refused in the dialog; a good one is copied in.
    bad = tmp_path / "not-a-model"
    bad.mkdir()
    (bad / "config.json").write_text("{}")
    manager.import_path(bad)
    qtbot.waitUntil(lambda: "Not imported" in manager.message.text(), timeout=WAIT_MS)
    assert "no weights" in manager.message.text()
    assert not (models / "not-a-model").exists()
    good = tmp_path / "my-model"
    import shutil

    shutil.copytree(tiny_repo_files[0], good)
    manager.import_path(good)
    qtbot.waitUntil(lambda: any(entry.key == "model:my-model" for entry in manager.entries), timeout=WAIT_MS)
    dialog = manager.import_chooser(folder=True)  # the folder chooser: opens in the models folder
    assert Path(dialog.directory().absolutePath()) == models
    dialog.setDirectory(str(tmp_path))
    dialog.selectFile(str(good))
    dialog.accept()
    assert chosen_path(dialog) == good and dialog.result() == dialog.DialogCode.Accepted
    screenshot(manager, "wizard-5-manager")
    manager.sections.setCurrentIndex(1)
    screenshot(manager, "wizard-6-manager-catalog")
    manager.sections.setCurrentIndex(0)

    # A model folder broken after it was listed is reported in the dialog; nothing is saved or loaded.
    manager.select("model:my-model")
    (models / "my-model" / "model.safetensors").unlink()
    manager.use_selected()
    assert "cannot be used" in manager.message.text() and window.settings.target.endswith("org--tiny-target")
    shutil.copy(tiny_repo_files[0] / "model.safetensors", models / "my-model" / "model.safetensors")

    # Switch to the imported model (no draft): saved, the engine reloads, the conversations stay.
    manager.select("model:my-model")
    with qtbot.waitSignal(bridge.status_changed, timeout=WAIT_MS, check_params_cb=lambda s: s.state == "loading"):
        manager.use_selected()
    qtbot.waitUntil(lambda: bridge.status.state == READY, timeout=WAIT_MS)
    assert window.settings.target == str(models / "my-model") and window.settings.draft == ""
    assert "Switched to my-model" in window.toast.text()
    assert manager.message.text() == "Now using my-model."  # not "Switching…" once loaded
    assert window.model_button.text().startswith("my-model")
    from app.settings.schema import load_settings

    assert load_settings(app_paths.settings_file).target == str(models / "my-model")
    assert [c.title for c in window.controller.conversations.rows] == before
    with qtbot.waitSignal(window.controller.answer_finished, timeout=WAIT_MS):
        window.send("w6 w7")

    # Delete asks first; a no keeps the files, a folder still downloading is kept, a yes removes them.
    from core.models.folder_lock import FolderLock

    answers = iter([False, True, True])
    manager.confirm = lambda title, text, verb: next(answers)
    manager.select("tiny")
    manager.delete_selected()
    assert (models / "org--tiny-target").exists()
    with FolderLock(models / "org--tiny-target"):  # a download holds it (flock: a second open file conflicts)
        manager.delete_selected()
    assert "still downloading: stop its download first" in manager.message.text()
    assert (models / "org--tiny-target" / "config.json").exists()
    manager.select("tiny")
    manager.delete_selected()
    assert not (models / "org--tiny-target").exists() and not (models / "org--tiny-draft").exists()
    window.close_model_manager()
    window.close()


def test_first_start_opens_the_wizard_and_cancelling_keeps_the_built_in_pair(qtbot, served, app_paths):
    """No settings file: the wizard opens (modal); cancelling it still leaves a working app (the built-in
    pair, saved). With settings saved and a download pending, the app asks before resuming."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.first_run import before_main_window
    from app.settings.schema import AppSettings, load_settings

    seen = []

    def cancel_when_open() -> None:
        wizard = QApplication.activeModalWidget()
        if not isinstance(wizard, FirstRunWizard):
            QTimer.singleShot(50, cancel_when_open)
            return
        seen.append(wizard.currentId())
        wizard.reject()

    QTimer.singleShot(50, cancel_when_open)
    settings, bridge = before_main_window(app_paths, AppSettings(), served.models_dir)
    assert seen == [HARDWARE] and bridge is None
    assert settings.target == "builtin" and load_settings(app_paths.settings_file).target == "builtin"

    (served.models_dir / "org--tiny-draft").mkdir(parents=True)  # an unfinished download of the tiny pair
    from core.models.hub import fetch_listing
    from core.models.manifest import write_manifest

    write_manifest(served.models_dir / "org--tiny-draft", fetch_listing("org/tiny-draft"), complete=False)
    asked = []
    settings, bridge = before_main_window(
        app_paths, settings, served.models_dir, ask=lambda pair: asked.append(pair) or False
    )
    assert asked == ["tiny"] and bridge is None and settings.target == "builtin"


@pytest.mark.slow
def test_gated_model_asks_for_the_token_and_a_damaged_file_is_fetched_again(qtbot, served, hub, tiny_repo_files):
    import os

    from core.models.token_store import current_token

    target, _ = tiny_repo_files
    hub.add_repo(
        "org/gated-target", {path.name: path.read_bytes() for path in target.iterdir()}, gated=True, token="hf_right"
    )
    catalog_file = Path(os.environ["SPECEXEC_CATALOG"])
    catalog = json.loads(catalog_file.read_text())
    tiny = next(pair for pair in catalog["pairs"] if pair["id"] == "tiny")
    gated = {
        **tiny,
        "id": "gated",
        "name": "Gated test pair",
        "gated": True,
        "licence_url": "https://example.org/accept-the-licence",
        "target": {**tiny["target"], "repo": "org/gated-target"},
    }
    catalog["pairs"].append(gated)
    catalog_file.write_text(json.dumps(catalog))
    wizard = open_wizard(qtbot, served)
    wizard.next()
    choose(wizard, "gated")
    assert "gated" in wizard.choose_page.note.text()
    wizard.next()
    page = wizard.download_page
    qtbot.waitUntil(lambda: page.token_box.isVisibleTo(page), timeout=WAIT_MS)
    assert "huggingface.co/org/gated-target" in page.message.text()  # the refusing repo's page: accept there
    assert "huggingface.co/settings/tokens" in page.message.text()
    screenshot(wizard, "wizard-3-download-gated")
    hub.corrupt("model.safetensors", times=1)  # the first copy arrives damaged: shown, then fetched again
    page.token_edit.setText("hf_right")
    page.token_button.click()
    assert current_token() == "hf_right"  # kept like `specexec models login` (a file here: no keyring)
    qtbot.waitUntil(lambda: page.done or page.log.toPlainText().count("Stopped") > 1, timeout=WAIT_MS)
    assert page.done, page.log.toPlainText()
    assert "damaged on the way" in page.log.toPlainText()
    assert not page.token_box.isVisibleTo(page)
    wizard.reject()
