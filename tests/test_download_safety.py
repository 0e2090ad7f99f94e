"""Issue 23: a broken or hostile hub cannot turn a download against the user. Every case runs against the
loopback hub (a real HTTP server) and asserts what is on disk afterwards and the event the user sees."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import signal
import threading

import pytest

from core.cli.main import main
from core.errors import DownloadError
from core.models.download import DownloadJob, DownloadSettings, download
from core.models.folder_lock import FolderLock, is_downloading, lock_path
from core.models.hub import fetch_listing
from core.models.manifest import read_manifest
from core.models.safe_paths import path_problem

pytest.register_assert_rewrite("hub_server")
from hub_server import Recorder, cli_process, git_blob_id, payload, read_events_until  # noqa: E402

pytest_plugins = ["hub_server"]
pytestmark = pytest.mark.timeout(90)

BIG = "model.safetensors"
CONFIG = "config.json"
FAST = DownloadSettings(stall_timeout_s=1, connect_timeout_s=2, backoff_s=0.01, progress_interval_s=0.05)


def repo_files(seed: int = 0, big: int = 3 << 20) -> dict[str, bytes]:
    return {
        CONFIG: b'{"model_type": "llama", "seed": %d}' % seed,
        BIG: payload(big, seed),
        "sub/tokenizer.json": payload(900, seed + 1),
    }


def run_cli(args: list[str], capsys) -> tuple[int, list[dict]]:
    code = main(args)
    out = capsys.readouterr().out
    return code, [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def on_disk(folder) -> dict[str, str]:
    """sha256 of every file under `folder` but the manifest, by relative path."""
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != "specexec-download.json"
    }


def digests(files: dict[str, bytes]) -> dict[str, str]:
    return {path: hashlib.sha256(data).hexdigest() for path, data in files.items()}


# -- hostile listings ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "../../victim.txt",
        "sub/../../../victim.txt",
        "ABSOLUTE",
        "..\\..\\victim.txt",
        "C:victim.txt",
        "model.safetensors:stream",
        "NUL.txt",
        "sub/com1",
        "specexec-download.json",
        "model.safetensors.incomplete",
        "trailing-dot.",
        "line\nbreak",
        "CONFIG.JSON",
        "config.json/inside",
        "sub/" + "x" * 240 + ".json",
    ],
)
def test_a_later_commit_with_an_unsafe_path_is_refused_before_anything_on_disk_changes(
    hub, hub_env, capsys, tmp_path, path
):
    first = repo_files(0)
    hub.add_repo("org/tiny", first)
    assert run_cli(["models", "download", "org/tiny", "--json"], capsys)[0] == 0
    folder = hub_env.models_dir / "org--tiny"
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"the user's own file")
    if path == "ABSOLUTE":
        path = str(victim)
    # The later commit changes every file (so an unguarded downloader would delete them first) and adds `path`.
    later = {**repo_files(1), path: b"overwritten"}
    hub.add_repo("org/tiny", later)
    hub.reset_counters()
    code, events = run_cli(["models", "download", "org/tiny", "--json"], capsys)
    assert code == 2 and [event["event"] for event in events] == ["error"]
    assert events[0]["kind"] == "unsafe" and repr(path)[:60] in events[0]["message"]
    assert "Nothing was written or deleted" in events[0]["message"]
    assert victim.read_bytes() == b"the user's own file"
    assert on_disk(folder) == digests(first)  # the old commit's files, untouched
    manifest = read_manifest(folder)
    assert manifest.complete and manifest.commit != hub.find("org/tiny", "main")[0].commit
    assert hub.requests == [] and hub.bytes_served == 0
    assert not lock_path(folder).exists()


def test_path_rules():
    for fine in (
        "config.json",
        "sub/dir/model-00001-of-00002.safetensors",
        ".gitattributes",
        "a b/c.txt",
        "tokenizer.model",
        "console.json",
        "nul-model.bin",
        "modèle.bin",
        "x" * 244,  # its partial: 255 bytes
    ):
        assert path_problem(fine) is None, fine
    for bad, words in (
        ("", "empty"),
        ("/etc/passwd", "absolute"),
        ("a//b", "empty"),
        ("./a", "'.'"),
        ("a/../b", "leaves"),
        ("a\\b", "'\\\\'"),
        ("D:x", "':'"),
        ("x:Zone.Identifier", "':'"),
        ("aux", "device"),
        ("LPT9.log", "device"),
        ("CON .txt", "device"),
        ("a.", "dot"),
        ("a /b", "space"),
        ("x\x00y", "control"),
        ("x\x9b2Jy", "control"),  # C1: an 8-bit CSI
        ("model\u202egpj.exe", "reorder"),
        ("a.incomplete", "own"),
        ("sub/specexec-download.json.tmp", "own"),
        ('a"b', "'\"'"),
        ("x" * 245, "longer than disks allow"),  # its partial would be 256 bytes
        ("sub/" + "é" * 123, "longer than disks allow"),  # 246 bytes in UTF-8
    ):
        problem = path_problem(bad)
        assert problem is not None and words in problem, (bad, problem)


def test_a_listing_with_a_size_or_checksum_that_makes_no_sense_is_refused(hub, hub_env, capsys):
    hosted = hub.add_repo("org/odd", repo_files(0))
    for extra in (
        {"rfilename": "x.bin", "size": "12", "blobId": "0" * 40},
        {"rfilename": "x.bin", "size": -1, "blobId": "0" * 40},
        {"rfilename": "x.bin", "size": 10**400, "blobId": "0" * 40},
        {"rfilename": "x.bin", "size": 2**63, "lfs": {"size": 2**63, "sha256": "0" * 64, "pointerSize": 1}},
        {"rfilename": "x.bin", "size": 3},
        {"rfilename": "x.bin", "size": 3, "blobId": "../../x"},
        {"rfilename": "x.bin", "size": 3, "lfs": {"size": 3, "sha256": "nothex", "pointerSize": 1}},
        {"rfilename": 7, "size": 3, "blobId": "0" * 40},
    ):
        hosted.extra_siblings[:] = [extra]
        code, events = run_cli(["models", "download", "org/odd", "--json"], capsys)
        assert code == 2 and [event["event"] for event in events] == ["error"], extra
        assert events[0]["kind"] == "unsafe", (extra, events)
    assert not (hub_env.models_dir / "org--odd").exists() and hub.bytes_served == 0


# -- small files are verified ------------------------------------------------------------------------------


def test_a_same_size_change_to_a_small_file_is_fetched_and_the_new_content_kept(hub, hub_env, capsys):
    first = repo_files(0)
    hub.add_repo("org/tiny", first)
    assert run_cli(["models", "download", "org/tiny", "--json"], capsys)[0] == 0
    later = {**first, CONFIG: first[CONFIG].replace(b"llama", b"LLAMA")}
    assert len(later[CONFIG]) == len(first[CONFIG])
    second = hub.add_repo("org/tiny", later)
    hub.reset_counters()
    code, events = run_cli(["models", "download", "org/tiny", "--json"], capsys)
    assert code == 0
    assert {"event": "check", "file": f"org--tiny/{CONFIG}", "ok": False} in events
    assert {"event": "verify", "file": f"org--tiny/{CONFIG}", "ok": True} in events
    folder = hub_env.models_dir / "org--tiny"
    assert on_disk(folder) == digests(later)
    assert hub.bytes_by_path == {CONFIG: len(later[CONFIG])}  # only the changed file travelled
    manifest = read_manifest(folder)
    assert manifest.complete and manifest.commit == second.commit
    assert {file.path: file.blob_id for file in manifest.files}[CONFIG] == git_blob_id(later[CONFIG])


def test_a_small_file_corrupted_in_transit_is_fetched_again_or_refused(hub, hub_env, capsys):
    files = repo_files(0)
    hub.add_repo("org/tiny", files)
    hub.corrupt(CONFIG, times=1)
    code, events = run_cli(["models", "download", "org/tiny", "--json"], capsys)
    assert code == 0
    checks = [event["ok"] for event in events if event["event"] == "verify" and event["file"].endswith(CONFIG)]
    assert checks == [False, True]
    assert on_disk(hub_env.models_dir / "org--tiny") == digests(files)

    hub.add_repo("org/broken", files)
    hub.corrupt(CONFIG, times=2)
    code, events = run_cli(["models", "download", "org/broken", "--json"], capsys)
    assert code == 2 and events[-1]["kind"] == "verify" and "corrupted twice" in events[-1]["message"]
    assert f"git blob id {git_blob_id(files[CONFIG])}" in events[-1]["message"]
    folder = hub_env.models_dir / "org--broken"
    assert not (folder / CONFIG).exists() and not (folder / f"{CONFIG}.incomplete").exists()
    assert read_manifest(folder).complete is False


def test_files_copied_into_the_folder_are_hashed_before_they_count(hub, hub_env, capsys):
    files = repo_files(0)
    hub.add_repo("org/tiny", files)
    folder = hub_env.models_dir / "org--tiny"
    for path, data in files.items():  # a copy from elsewhere, no manifest; one small file differs, same size
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    (folder / CONFIG).write_bytes(files[CONFIG].replace(b"llama", b"llamb"))
    code, events = run_cli(["models", "download", "org/tiny", "--json"], capsys)
    assert code == 0
    checks = {event["file"]: event["ok"] for event in events if event["event"] == "check"}
    assert checks == {f"org--tiny/{path}": path != CONFIG for path in files}
    assert hub.bytes_by_path == {CONFIG: len(files[CONFIG])}
    assert on_disk(folder) == digests(files)
    # Verified now: the next run trusts the stamps and hashes nothing (no check events), fetches nothing.
    hub.reset_counters()
    code, events = run_cli(["models", "download", "org/tiny", "--json"], capsys)
    assert code == 0 and events[0]["event"] == "plan" and events[0]["already_bytes"] == events[0]["total_bytes"]
    assert hub.bytes_served == 0
    # A file rewritten behind the downloader's back (new stamp) is hashed again.
    (folder / BIG).write_bytes(files[BIG])
    code, events = run_cli(["models", "download", "org/tiny", "--json"], capsys)
    assert code == 0 and events[0] == {"event": "check", "file": f"org--tiny/{BIG}", "ok": True}


# -- partial files and servers that misbehave --------------------------------------------------------------


def test_an_oversized_partial_is_discarded_before_planning(hub, hub_env):
    files = repo_files(0)
    hub.add_repo("org/tiny", files)
    folder = hub_env.models_dir / "org--tiny"
    listing = fetch_listing("org/tiny")
    cancel = threading.Event()

    class CancelMidFile(Recorder):
        def progress(self, progress):
            if progress.file.endswith(BIG) and progress.done_bytes > 1 << 20:
                cancel.set()

    hub.limit_rate(2 << 20)
    with pytest.raises(DownloadError):
        download([DownloadJob(listing, folder)], hub_env.models_dir, CancelMidFile(), cancel=cancel, settings=FAST)
    hub.limit_rate(None)
    partial = folder / f"{BIG}.incomplete"
    with open(partial, "ab") as handle:  # longer than the real file (a bug, a disk tool, another program)
        handle.write(b"\0" * (len(files[BIG]) + 10 - partial.stat().st_size))
    hub.wait_idle()
    hub.reset_counters()
    recorder = Recorder()
    download([DownloadJob(listing, folder)], hub_env.models_dir, recorder, settings=FAST)
    assert on_disk(folder) == digests(files)
    ((_, total, already),) = recorder.of("plan")
    assert already == len(files[CONFIG])  # the oversized partial counted for nothing
    assert hub.bytes_by_path[BIG] == len(files[BIG]) and (BIG, None) in hub.requests
    assert all(ok for _, _, ok in recorder.of("verify")) and not recorder.of("retry")
    done = [done for _, done in recorder.of("progress")]
    assert done == sorted(done) and min(done) >= already


def test_a_server_that_ignores_range_and_keeps_breaking_off_is_given_up_on(hub, hub_env):
    files = repo_files(0)
    hub.add_repo("org/tiny", files)
    hub.ignore_range()
    hub.drop_once(BIG, after_bytes=1 << 20, times=1000)
    recorder = Recorder()
    folder = hub_env.models_dir / "org--tiny"
    settings = DownloadSettings(stall_timeout_s=1, connect_timeout_s=2, backoff_s=0.01, max_attempts=3)
    with pytest.raises(DownloadError) as raised:
        download([DownloadJob(fetch_listing("org/tiny"), folder)], hub_env.models_dir, recorder, settings=settings)
    assert raised.value.kind == "network"
    message = str(raised.value)
    assert "does not resume" in message and "whole file from the start" in message
    assert f"without getting past {1 << 20} of {len(files[BIG])} bytes" in message
    # The first attempt got 1 MiB (progress); each reconnect started over and got no further: 3 more, then stop.
    assert [event[2] for event in recorder.of("retry")] == [1, 2, 3]
    assert hub.bytes_by_path[BIG] == 4 * (1 << 20)
    assert (folder / f"{BIG}.incomplete").stat().st_size == 1 << 20
    assert read_manifest(folder).complete is False and not (folder / BIG).exists()


def test_a_server_that_breaks_off_but_resumes_is_followed_to_the_end(hub, hub_env):
    files = repo_files(0)
    hub.add_repo("org/tiny", files)
    hub.drop_once(BIG, after_bytes=512 << 10, times=5)  # five breaks, each after new bytes: never "in a row"
    recorder = Recorder()
    folder = hub_env.models_dir / "org--tiny"
    settings = DownloadSettings(stall_timeout_s=1, connect_timeout_s=2, backoff_s=0.01, max_attempts=2)
    download([DownloadJob(fetch_listing("org/tiny"), folder)], hub_env.models_dir, recorder, settings=settings)
    assert on_disk(folder) == digests(files)
    assert [event[2] for event in recorder.of("retry")] == [1] * 5
    assert hub.bytes_by_path[BIG] == len(files[BIG])  # every byte once


# -- one download per folder -------------------------------------------------------------------------------


def test_a_second_download_of_the_same_repo_says_already_downloading(hub, hub_env):
    files = repo_files(0, big=6 << 20)
    hub.add_repo("org/tiny", files)
    hub.limit_rate(1 << 16)
    folder = hub_env.models_dir / "org--tiny"
    with cli_process(hub_env, "download", "org/tiny", "--json") as first:
        events = read_events_until(first, lambda event: event["event"] == "progress" and event["done_bytes"] > 0)
        hub.limit_rate(1)  # held until the second process has answered, however long it takes to start
        with cli_process(hub_env, "download", "org/tiny", "--json") as second:
            out, err = second.communicate(timeout=120)
        hub.limit_rate(None)
        assert second.returncode == 75, err
        (busy,) = [json.loads(line) for line in out.splitlines()]
        assert busy == {
            "event": "error",
            "kind": "busy",
            "folder": str(folder),
            "pid": first.pid,
            "message": busy["message"],
        }
        assert "already downloading" in busy["message"] and str(first.pid) in busy["message"]
        events += [json.loads(line) for line in first.stdout]
        assert first.wait(timeout=60) == 0, first.stderr.read()
    assert events[-1]["event"] == "done"
    assert all(event["ok"] for event in events if event["event"] == "verify")
    assert on_disk(folder) == digests(files)
    assert hub.bytes_by_path[BIG] == len(files[BIG])  # the refused one fetched nothing
    assert not lock_path(folder).exists() and not is_downloading(folder)


def test_attach_follows_the_running_download_and_fetches_nothing_itself(hub, hub_env):
    files = repo_files(0, big=6 << 20)
    hub.add_repo("org/tiny", files)
    hub.limit_rate(1 << 16)
    with cli_process(hub_env, "download", "org/tiny", "--json") as first:
        read_events_until(first, lambda event: event["event"] == "progress" and event["done_bytes"] > 0)
        hub.limit_rate(1)  # held until the follower has attached, however long it takes to start
        with cli_process(hub_env, "download", "org/tiny", "--json", "--attach") as follower:
            events = read_events_until(follower, lambda event: event["event"] in ("attach", "plan"))
            hub.limit_rate(1 << 20)  # ~6 s: the follower sees the bytes grow
            out, err = follower.communicate(timeout=120)
        assert follower.returncode == 0, err
        assert first.wait(timeout=60) == 0
    events += [json.loads(line) for line in out.splitlines()]
    folder = hub_env.models_dir / "org--tiny"
    assert events[0] == {"event": "attach", "folder": str(folder), "pid": first.pid}
    followed = [event["done_bytes"] for event in events if event["event"] == "progress"]
    assert len(followed) >= 2 and followed == sorted(followed)  # the other process's bytes, as they grew
    plan = next(event for event in events if event["event"] == "plan")
    assert plan["already_bytes"] == plan["total_bytes"] and events[-1]["event"] == "done"
    assert hub.bytes_by_path[BIG] == len(files[BIG])
    assert on_disk(folder) == digests(files)


def test_a_lock_left_by_a_killed_process_is_taken_over_and_the_download_resumes(hub, hub_env):
    files = repo_files(0, big=6 << 20)
    hub.add_repo("org/tiny", files)
    hub.limit_rate(2 << 20)
    folder = hub_env.models_dir / "org--tiny"
    with cli_process(hub_env, "download", "org/tiny", "--json") as first:
        read_events_until(first, lambda event: event["event"] == "progress" and event["done_bytes"] > 1 << 20)
        assert lock_path(folder).read_text().strip() == str(first.pid)
        os.kill(first.pid, signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL
    assert lock_path(folder).read_text().strip() == str(first.pid)  # the dead owner's lock is still there
    assert not is_downloading(folder)
    hub.wait_idle()
    kept = (folder / f"{BIG}.incomplete").stat().st_size
    hub.limit_rate(None)
    hub.reset_counters()
    with cli_process(hub_env, "download", "org/tiny", "--json") as second:
        out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    plan = json.loads(out.splitlines()[0])
    assert plan["event"] == "plan" and plan["already_bytes"] >= kept > 0
    assert hub.bytes_served == plan["total_bytes"] - plan["already_bytes"]
    assert on_disk(folder) == digests(files)
    assert not lock_path(folder).exists()


def test_the_lock_is_exclusive_in_one_process_too(tmp_path):
    folder = tmp_path / "org--tiny"
    with FolderLock(folder):
        assert is_downloading(folder)
        with pytest.raises(DownloadError) as raised:
            FolderLock(folder).acquire()
        assert raised.value.kind == "busy" and raised.value.pid == os.getpid()
    assert not is_downloading(folder) and not lock_path(folder).exists() and not folder.exists()


# -- every failure is an error event with a kind, and no token reaches a message -----------------------------


def test_an_unexpected_os_error_is_an_io_error_event_not_a_traceback(hub, hub_env):
    hub.add_repo("org/tiny", repo_files(0))
    hub_env.models_dir.mkdir(parents=True)
    (hub_env.models_dir / "org--tiny").write_text("a file where the model folder goes")
    with cli_process(hub_env, "download", "org/tiny", "--json") as process:
        out, err = process.communicate(timeout=60)
    assert process.returncode == 2
    events = [json.loads(line) for line in out.splitlines()]
    assert [event["event"] for event in events] == ["error"] and events[0]["kind"] == "io"
    assert str(hub_env.models_dir) in events[0]["message"] and "Traceback" not in err


@pytest.mark.parametrize("token", ["hf_abc\x01def", "hf_abc def", "hf_abc\ndef", "hf_\u00e9t\u00e9"])
def test_a_token_with_whitespace_or_control_characters_is_refused_when_saved_and_read(hub, hub_env, monkeypatch, token):
    hub.add_repo("org/gated", repo_files(0), gated=True, token="hf_right")
    with cli_process(hub_env, "login", "--token", token) as login:
        out, err = login.communicate(timeout=60)
    assert login.returncode == 2 and "cannot be sent" in err and token not in out + err
    assert not (hub_env.config_dir / "hf-token").exists()

    env = {**hub_env.env, "HF_TOKEN": token}
    with cli_process(dataclasses.replace(hub_env, env=env), "download", "org/gated", "--json") as process:
        out, err = process.communicate(timeout=60)
    assert process.returncode == 2
    (error,) = [json.loads(line) for line in out.splitlines()]
    assert error["kind"] == "gated" and "HF_TOKEN" in error["message"] and "cannot be sent" in error["message"]
    assert token not in out + err and "Bearer" not in out + err

    hub_env.config_dir.mkdir(parents=True, exist_ok=True)
    (hub_env.config_dir / "hf-token").write_text(token + "\n")  # stored by an older version, or edited by hand
    with cli_process(hub_env, "download", "org/gated", "--json") as process:
        out, err = process.communicate(timeout=60)
    assert process.returncode == 2 and json.loads(out)["kind"] == "gated" and token not in out + err
    assert hub.requests == [] and not (hub_env.models_dir / "org--gated").exists()


def test_a_manifest_edited_or_damaged_reads_as_none_or_as_written(tmp_path):
    """A model folder's manifest is read by `models list`, the wizard and a resumed download, and a folder may
    come from anywhere: 500 seeded mutations of a real one (values of every JSON type, a size beyond a float,
    keys deleted or added) each read as a manifest or as none (not our download), never an error. A size of
    1e400 was an OverflowError."""
    from json_mutation import mutated_json

    from core.models.hub import RemoteFile, RemoteRepo
    from core.models.manifest import MANIFEST_NAME, FileStamp, write_manifest

    files = (RemoteFile(CONFIG, 40, "a" * 64), RemoteFile(BIG, 3 << 20, None, "b" * 40))
    write_manifest(tmp_path, RemoteRepo("org/model", "main", "c" * 40, files), False, {CONFIG: FileStamp(40, 1, 2)})
    written = json.loads((tmp_path / MANIFEST_NAME).read_text())
    assert read_manifest(tmp_path).files == files
    beyond = {**written, "files": [written["files"][0], {**written["files"][1], "size": 1e400}]}
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(beyond))
    assert read_manifest(tmp_path) is None
    chosen, outcomes = random.Random(23), {"read": 0, "none": 0}
    for _ in range(500):
        damaged = mutated_json(written, chosen, ["files", "size", "verified", "complete", "path"])
        (tmp_path / MANIFEST_NAME).write_text(json.dumps(damaged))
        outcomes["read" if read_manifest(tmp_path) is not None else "none"] += 1
    assert outcomes["read"] and outcomes["none"]
