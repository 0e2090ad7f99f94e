"""Issue 23 in the app: a second download of a model that is already downloading (a second window, or a
terminal) attaches to the running one's progress instead of competing with it; cancelling the follower
never deletes the other download's files. Real download processes against the loopback hub."""

from __future__ import annotations

import hashlib

import pytest

pytest.importorskip("PySide6")

from app.models.download_worker import DownloadProcess  # noqa: E402
from core.models.folder_lock import is_downloading  # noqa: E402

pytest.register_assert_rewrite("hub_server")
from hub_server import cli_process, payload, read_events_until  # noqa: E402

pytest_plugins = ["hub_server"]
pytestmark = [pytest.mark.qt, pytest.mark.timeout(120)]

BIG = "model.safetensors"
WAIT_MS = 60_000


@pytest.mark.slow
def test_a_second_app_download_attaches_to_a_running_one(qtbot, hub, hub_env):
    files = {"config.json": b'{"model_type": "llama"}', BIG: payload(6 << 20, seed=1)}
    hub.add_repo("org/tiny", files)
    hub.limit_rate(1 << 20)  # ~6 s: the terminal's download is still running when the app starts its own
    with cli_process(hub_env, "download", "org/tiny", "--json") as terminal:
        read_events_until(terminal, lambda event: event["event"] == "progress" and event["done_bytes"] > 0)
        app = DownloadProcess(hub_env.models_dir)
        attached, progress, failed = [], [], []
        app.attached.connect(attached.append)
        app.progress.connect(lambda event: progress.append(event["done_bytes"]))
        app.failed.connect(failed.append)
        with qtbot.waitSignal(app.finished, timeout=WAIT_MS) as finished:
            app.start("org/tiny")
        assert terminal.wait(timeout=60) == 0
    folder = hub_env.models_dir / "org--tiny"
    assert not failed and attached == [{"folder": str(folder), "pid": terminal.pid}]
    assert len(progress) >= 2 and progress == sorted(progress)
    assert finished.args == [{"model": str(folder)}]
    assert hub.bytes_by_path[BIG] == len(files[BIG])  # fetched once, by the terminal
    for path, data in files.items():
        assert hashlib.sha256((folder / path).read_bytes()).digest() == hashlib.sha256(data).digest()


@pytest.mark.slow
def test_cancelling_a_follower_keeps_the_running_download(qtbot, hub, hub_env):
    files = {"config.json": b'{"model_type": "llama"}', BIG: payload(6 << 20, seed=2)}
    hub.add_repo("org/tiny", files)
    hub.limit_rate(1 << 20)
    folder = hub_env.models_dir / "org--tiny"
    with cli_process(hub_env, "download", "org/tiny", "--json") as terminal:
        read_events_until(terminal, lambda event: event["event"] == "progress" and event["done_bytes"] > 0)
        app = DownloadProcess(hub_env.models_dir)
        with qtbot.waitSignal(app.attached, timeout=WAIT_MS):
            app.start("org/tiny")
        app.cancel()
        assert not app.running and is_downloading(folder)
        assert (folder / f"{BIG}.incomplete").exists()  # the terminal's partial file is still there
        assert terminal.wait(timeout=60) == 0
    assert (folder / BIG).read_bytes() == files[BIG]
