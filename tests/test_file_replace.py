"""Renames Windows refuses for a moment (an antivirus scanning a file just written, a reader of a download's
manifest) are tried again; every other refusal is raised at once.

Windows' sharing rules cannot happen on this system, so a stand-in for os.replace refuses as Windows does
(PermissionError with `winerror` 32, ERROR_SHARING_VIOLATION) a given number of times, then renames for real."""

from __future__ import annotations

import os

import pytest

import core.system.disk as disk
from core.cli.main import main
from core.system.disk import replace_file, write_text_atomically

pytest.register_assert_rewrite("hub_server")
from hub_server import HubEnv, LoopbackHub, payload  # noqa: E402

pytest_plugins = ["hub_server"]

real_replace = os.replace


def windows_refusal(winerror: int | None = 32) -> PermissionError:
    error = PermissionError(13, "The process cannot access the file because it is being used by another process")
    if winerror is not None:
        error.winerror = winerror  # what Windows' OSError carries; Linux's has no such attribute
    return error


class RefusingReplace:
    """os.replace that refuses the renames whose target ends with `suffix`, `times` times each, then renames."""

    def __init__(self, times: int, suffix: str = "", winerror: int | None = 32) -> None:
        self.times, self.suffix, self.winerror = times, suffix, winerror
        self.refused: dict[str, int] = {}
        self.calls = 0

    def __call__(self, source, target) -> None:
        self.calls += 1
        name = os.fspath(target)
        if name.endswith(self.suffix) and self.refused.get(name, 0) < self.times:
            self.refused[name] = self.refused.get(name, 0) + 1
            raise windows_refusal(self.winerror)
        real_replace(source, target)


def test_a_rename_windows_refuses_for_a_moment_is_done_when_it_lets_go(tmp_path, monkeypatch):
    refusing = RefusingReplace(times=3)
    monkeypatch.setattr(disk.os, "replace", refusing)
    target = tmp_path / "settings.json"
    target.write_text("old", encoding="utf-8")
    write_text_atomically(target, "new")
    assert target.read_text(encoding="utf-8") == "new" and refusing.calls == 4
    assert [path.name for path in tmp_path.iterdir()] == ["settings.json"]


def test_a_refusal_that_is_not_windows_being_busy_is_raised_at_once(tmp_path, monkeypatch):
    for winerror in (None, 2):  # Linux or macOS refusing (no winerror); Windows' "file not found"
        refusing = RefusingReplace(times=1, winerror=winerror)
        monkeypatch.setattr(disk.os, "replace", refusing)
        (tmp_path / "a").write_text("a", encoding="utf-8")
        with pytest.raises(PermissionError):
            replace_file(tmp_path / "a", tmp_path / "b")
        assert refusing.calls == 1 and not (tmp_path / "b").exists()


def test_a_file_held_longer_than_the_patience_is_raised_with_windows_words(tmp_path, monkeypatch):
    monkeypatch.setattr(disk, "REPLACE_PATIENCE_S", 0.2)
    refusing = RefusingReplace(times=10**6)
    monkeypatch.setattr(disk.os, "replace", refusing)
    (tmp_path / "a").write_text("a", encoding="utf-8")
    with pytest.raises(PermissionError, match="being used by another process"):
        replace_file(tmp_path / "a", tmp_path / "b")
    assert 2 <= refusing.calls <= 10  # tried again, waiting longer each time, then gave up
    assert (tmp_path / "a").exists()


def test_a_download_whose_files_and_manifest_windows_holds_for_a_moment_completes(
    hub: LoopbackHub, hub_env: HubEnv, capsys, monkeypatch
):
    """Each finished file's rename and each manifest write refused twice, as an antivirus scanning the new file
    or the app's Models page reading the manifest would on Windows: the download used to stop with an error."""
    files = {"config.json": b'{"model_type": "llama"}', "model.safetensors": payload(1 << 20, 3)}
    hub.add_repo("org/tiny", files)
    refusing = RefusingReplace(times=2)
    monkeypatch.setattr(disk.os, "replace", refusing)
    assert main(["models", "download", "org/tiny", "--json"]) == 0, capsys.readouterr()
    folder = hub_env.models_dir / "org--tiny"
    assert {name: (folder / name).read_bytes() for name in files} == files
    assert {os.path.basename(name) for name in refusing.refused} >= {*files, "specexec-download.json"}
