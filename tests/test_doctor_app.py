"""The GPU check in the app: a GPU that failed it is not used (the engine loads on the processor), the window
says so in its banner with the findings a click away, Menu > Help > Copy diagnostics carries the whole report, the
first-run wizard shows the verdict in one line and fits models for the processor, and --self-test runs it.

Reports come from tests/fixtures/doctor (what a real GPU machine writes) or from the real doctor on this
GPU-less machine."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from app_fixtures import FakeClient, app_paths, screenshot  # noqa: E402,F401

from app.engine.bridge import READY, EngineBridge  # noqa: E402
from app.system import gpu_check  # noqa: E402
from core.doctor.report import REPORT_FILE, load_report  # noqa: E402
from core.engine import protocol as P  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "doctor"
pytestmark = pytest.mark.qt


def _install(name: str, log_dir: Path) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / f"{name}.json", log_dir / REPORT_FILE)


def test_an_automatic_device_avoids_a_gpu_that_failed_and_only_that():
    refused, passed = (
        load_report(FIXTURES / "driver-too-old.json"),
        load_report(FIXTURES / "rtx4090-gen4-x16-pass.json"),
    )
    warned = load_report(FIXTURES / "graphs-differ.json")
    auto = P.Load(target="t", draft="d")
    assert gpu_check.checked_load(auto, refused).device == "cpu"
    assert gpu_check.checked_load(P.Load(target="t", device="cuda"), refused).device == "cuda"  # chosen by name
    for report in (passed, warned, None):
        assert gpu_check.checked_load(auto, report) is auto
    assert gpu_check.banner_text(refused).startswith("<b>Your graphics card is not used.</b> Update the NVIDIA driver")
    assert (
        '(yours is 550.54.14): <a href="https://www.nvidia.com/drivers">https://www.nvidia.com/drivers</a>. Until'
        in gpu_check.banner_text(refused)
    )
    assert (
        gpu_check.linked("a <b> & https://x.org/y.")
        == 'a &lt;b&gt; &amp; <a href="https://x.org/y">https://x.org/y</a>.'
    )
    assert gpu_check.banner_text(passed) is None and gpu_check.banner_text(None) is None
    section = gpu_check.diagnostics_section(refused)
    assert (
        section["verdict"].startswith("Update the NVIDIA driver")
        and '"driver_version":"550.54.14"' in section["report"]
    )
    assert gpu_check.diagnostics_section(None) == {"verdict": "not run on this machine yet"}


def test_engines_run_without_cuda_graphs_only_when_their_check_did_not_pass():
    from core.system.env import CUDA_GRAPHS_ENV

    for name, graphs_off in (("graphs-differ", True), ("rtx4090-gen4-x16-pass", False), ("driver-too-old", False)):
        environ: dict[str, str] = {}
        gpu_check.apply_graphs_verdict(load_report(FIXTURES / f"{name}.json"), environ)
        assert environ == ({CUDA_GRAPHS_ENV: "0"} if graphs_off else {}), name
    gpu_check.apply_graphs_verdict(None, environ)
    assert environ == {}
    chosen = {CUDA_GRAPHS_ENV: "1"}  # the person's own setting wins
    gpu_check.apply_graphs_verdict(load_report(FIXTURES / "graphs-differ.json"), chosen)
    assert chosen == {CUDA_GRAPHS_ENV: "1"}


def test_a_damaged_report_is_ignored_so_the_check_runs_again(tmp_path):
    (tmp_path / REPORT_FILE).write_text("{not json")
    assert gpu_check.read_report(tmp_path) is None and gpu_check.read_report(None) is None


class _DeviceRecordingClient(FakeClient):
    def __init__(self) -> None:
        super().__init__()
        self.devices: list[str] = []

    def load(self, target, draft, **settings) -> None:
        self.devices.append(settings["device"])
        super().load(target, draft, **settings)


def test_engine_bridge_loads_on_the_processor_after_a_failed_check(qtbot, tmp_path):
    _install("gtx1080-too-old", tmp_path)
    client = _DeviceRecordingClient()
    bridge = EngineBridge(lambda: client)
    bridge.gpu_report_dir = tmp_path
    try:
        bridge.start(P.Load(target="t", draft="d"))
        qtbot.waitUntil(lambda: bridge.status.state == READY, timeout=5000)
        bridge.load(P.Load(target="t2", draft=None, device="auto"))
        qtbot.waitUntil(lambda: len(client.devices) == 2, timeout=5000)
        assert client.devices == ["cpu", "cpu"]
    finally:
        bridge.shutdown()


def test_window_banner_and_diagnostics_after_a_failed_check(qtbot, app_paths):
    from app.window.main_window import MainWindow
    from app_fixtures import recording_bridge_class

    _install("driver-too-old", app_paths.log_dir)
    window = MainWindow(app_paths, bridge=recording_bridge_class()(), confirm_delete=False)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    assert window.bridge.gpu_report_dir == app_paths.log_dir
    assert window.banner.isVisible() and "Update the NVIDIA driver to version 580.65.06" in window.banner.text()
    assert "[FAIL]" in window.banner.details()
    window._engine_status(window.bridge.status)  # an engine that is well keeps this banner up
    assert window.banner.isVisible()
    screenshot(window, "gpu-check-banner")
    text = window.diagnostics(with_gpu=False)
    assert "[GPU check]\nverdict: Update the NVIDIA driver" in text and '"schema_version":1' in text


def test_window_without_a_failed_check_shows_no_banner(qtbot, app_paths):
    from app.window.main_window import MainWindow
    from app_fixtures import recording_bridge_class

    _install("slow-ratio", app_paths.log_dir)  # a warning, not a failure: the GPU is used, no banner
    window = MainWindow(app_paths, bridge=recording_bridge_class()(), confirm_delete=False)
    qtbot.addWidget(window)
    assert not window.banner.isVisible()
    assert "works, with a warning" in window.diagnostics(with_gpu=False)


def test_wizard_shows_the_verdict_and_fits_models_for_the_processor(qtbot, app_paths, tmp_path):
    from app.models.wizard.hardware_page import HardwarePage
    from app.models.wizard.state import WizardState
    from app.models.wizard.words import hardware_summary
    from app.settings.schema import AppSettings
    from core.hardware.description import load_description

    state = WizardState(AppSettings(), tmp_path / "models")
    gpu_machine = load_description(Path(__file__).parent / "fixtures" / "hw" / "gpu24-ram64-pcie4.json")
    page = HardwarePage(state)
    qtbot.addWidget(page)
    page._found(state.predict(gpu_machine))
    assert state.hardware.gpus
    before = {fit.pair.id: fit.fit for fit in state.recommendation.pairs}
    page._checked(load_report(FIXTURES / "driver-too-old.json"))
    assert page.gpu_check.text().startswith("Update the NVIDIA driver") and not page.gpu_check.isHidden()
    qtbot.waitUntil(lambda: not state.hardware.gpus, timeout=30000)
    assert state.hardware.gpu_note.startswith("Update the NVIDIA driver")
    qtbot.waitUntil(lambda: page.summary.text() == hardware_summary(gpu_machine), timeout=5000)  # the card, as it is
    after = {fit.pair.id: fit.fit for fit in state.recommendation.pairs}
    assert after != before  # the 24 GB card's fits are gone: every pair is judged for the processor


def test_wizard_records_a_check_that_died_and_keeps_to_the_processor(qtbot, app_paths, tmp_path):
    from app.models.wizard.hardware_page import HardwarePage
    from app.models.wizard.state import WizardState
    from app.settings.schema import AppSettings
    from core.hardware.description import load_description

    state = WizardState(AppSettings(), tmp_path / "models")
    page = HardwarePage(state)
    qtbot.addWidget(page)
    page._found(state.predict(load_description(Path(__file__).parent / "fixtures" / "hw" / "gpu12-ram32-pcie4.json")))
    page._check_crashed("the GPU check stopped without a report (exit code -11)", app_paths.log_dir)
    stored = gpu_check.read_report(app_paths.log_dir)
    assert gpu_check.gpu_refused(stored) and "exit code -11" in stored.conclusion.summary
    assert gpu_check.checked_load(P.Load(target="t"), stored).device == "cpu"


def test_wizard_keeps_to_the_processor_when_the_dead_check_cannot_be_recorded(qtbot, tmp_path, caplog):
    """The log folder refuses the crash's report (here a file stands where the folder should be): that raised
    out of the page's slot, so the wizard never said the check died nor moved its fits to the processor; and
    the engine, which reads the verdict from that file, would have tried the GPU that crashed."""
    import logging

    from app.models.wizard.hardware_page import HardwarePage
    from app.models.wizard.state import WizardState
    from app.settings.schema import AppSettings
    from core.hardware.description import load_description

    state = WizardState(AppSettings(), tmp_path / "models")
    page = HardwarePage(state)
    qtbot.addWidget(page)
    page._found(state.predict(load_description(Path(__file__).parent / "fixtures" / "hw" / "gpu12-ram32-pcie4.json")))
    (tmp_path / "logs").write_text("a file where the log folder should be")
    with caplog.at_level(logging.WARNING):
        page._check_crashed("the GPU check stopped without a report (exit code -11)", tmp_path / "logs")
    assert page.gpu_check.text().startswith("The GPU check did not finish") and not page.gpu_check.isHidden()
    assert any("report could not be saved" in record.getMessage() for record in caplog.records)
    qtbot.waitUntil(lambda: not state.hardware.gpus, timeout=30000)  # fitted for the processor all the same
    # and the engine, which reads the verdict at each load, keeps to the processor for the rest of this run
    assert gpu_check.checked_load(P.Load(target="t"), gpu_check.read_report(tmp_path / "logs")).device == "cpu"


@pytest.mark.slow  # the doctor in a child process (~20 s)
def test_self_test_runs_the_gpu_check_and_reports_its_verdict(tmp_path):
    from app.system import self_test

    lines: list[str] = []
    self_test.check_gpu(tmp_path, lines.append)
    assert len(lines) == 1 and lines[0].startswith("GPU check (")
    report = load_report(tmp_path / REPORT_FILE)
    assert lines[0].endswith(report.conclusion.summary)
    if not Path("/proc/driver/nvidia").exists():
        assert lines[0].endswith("No NVIDIA GPU found: using the processor.")
