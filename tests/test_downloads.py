"""Resumable, verified downloads against a real HTTP server on loopback standing in for the hub."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core.cli.main import main
from core.errors import DownloadCancelledError, DownloadError
from core.models.download import DownloadJob, DownloadSettings, download
from core.planning.sizes import format_bytes
from core.models.download_progress import DownloadListener
from core.models.hub import fetch_listing
from core.system.locations import repo_folder_name
from core.models.manifest import read_manifest

pytest.register_assert_rewrite("hub_server")
from hub_server import MODELS_CLI, HubEnv, LoopbackHub, Recorder, payload  # noqa: E402

pytest_plugins = ["hub_server"]
pytestmark = pytest.mark.timeout(60)

FAST = DownloadSettings(stall_timeout_s=0.5, connect_timeout_s=2, backoff_s=0.05, progress_interval_s=0.05)
BIG = "model.safetensors"


def small_repo(hub: LoopbackHub, repo: str = "org/tiny", seed: int = 0, big: int = 3 << 20, **kwargs):
    files = {
        "config.json": b'{"model_type": "llama"}',
        BIG: payload(big, seed),
        "sub/extra.bin": payload(5000, seed + 1),
    }
    return hub.add_repo(repo, files, **kwargs), files


def run_cli(args: list[str], capsys) -> tuple[int, list[dict], str]:
    """The CLI in this process; returns (exit code, JSON events, stderr)."""
    code = main(args)
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.startswith("{")], err


def assert_files(folder: Path, files: dict[str, bytes]) -> None:
    for path, data in files.items():
        assert hashlib.sha256((folder / path).read_bytes()).digest() == hashlib.sha256(data).digest(), path
    assert not list(folder.rglob("*.incomplete"))


def fetch(hub_env: HubEnv, repo: str, listener: DownloadListener, **kwargs) -> Path:
    folder = hub_env.models_dir / repo_folder_name(repo)
    download([DownloadJob(fetch_listing(repo), folder)], hub_env.models_dir, listener, settings=FAST, **kwargs)
    return folder


def test_download_repo_json_events_files_and_manifest(hub, hub_env, capsys):
    hosted, files = small_repo(hub)
    code, events, _ = run_cli(["models", "download", "org/tiny", "--json"], capsys)
    assert code == 0
    folder = hub_env.models_dir / "org--tiny"
    plan, done = events[0], events[-1]
    assert plan["event"] == "plan" and plan["folder"] == str(folder) and plan["already_bytes"] == 0
    assert plan["total_bytes"] == sum(map(len, files.values()))
    assert {f["path"]: f["size"] for f in plan["files"]} == {f"org--tiny/{p}": len(d) for p, d in files.items()}
    assert done == {"event": "done", "folder": str(folder)}
    assert [e["ok"] for e in events if e["event"] == "verify"] == [True, True, True]
    last = [e for e in events if e["event"] == "progress"][-1]
    assert last["done_bytes"] == last["total_bytes"] == plan["total_bytes"] and last["eta_seconds"] == 0
    assert_files(folder, files)
    manifest = read_manifest(folder)
    assert manifest.complete and manifest.commit == hosted.commit and manifest.repo == "org/tiny"
    assert {f.path: f.sha256 for f in manifest.files}[BIG] == hashlib.sha256(files[BIG]).hexdigest()
    assert hub.bytes_served == plan["total_bytes"]
    # A second run fetches nothing and still succeeds.
    hub.reset_counters()
    code, events, _ = run_cli(["models", "download", "org/tiny", "--json"], capsys)
    assert code == 0 and events[0]["already_bytes"] == events[0]["total_bytes"] and hub.bytes_served == 0


# the shape every catalog model carries (the fit sizes it by it); the download does not read it
CATALOG_SHAPE = {
    "model_type": "llama",
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "vocab_size": 256,
}


def test_pair_from_catalog_downloads_target_and_draft(hub, hub_env, capsys, tmp_path, monkeypatch):
    target, target_files = small_repo(hub, "org/big-GPTQ", seed=1, revision="gptq-4bit")
    draft, draft_files = small_repo(hub, "org/small", seed=2)
    catalog = {
        "schema_version": 1,
        "pairs": [
            {
                "id": "tiny-pair",
                "name": "Tiny pair",
                "licence": "MIT",
                "gated": False,
                "context_length": 4096,
                "min_ram_gb": 1,
                "min_vram_gb": 0,
                "target": {
                    "repo": "org/big-GPTQ",
                    "revision": "gptq-4bit",
                    "quantization": "gptq-4bit",
                    "approx_bytes": 1,
                    "config": CATALOG_SHAPE,
                },
                "draft": {
                    "repo": "org/small",
                    "revision": "main",
                    "quantization": "fp16",
                    "approx_bytes": 1,
                    "config": CATALOG_SHAPE,
                },
            },
            {
                "id": "builtin",
                "name": "Built in",
                "licence": "Apache-2.0",
                "gated": False,
                "context_length": 8192,
                "min_ram_gb": 1,
                "min_vram_gb": 0,
                "target": {"repo": "builtin", "quantization": "float32", "approx_bytes": 1, "config": CATALOG_SHAPE},
                "draft": {
                    "repo": "builtin-draft",
                    "quantization": "rtn-4bit",
                    "approx_bytes": 1,
                    "config": CATALOG_SHAPE,
                },
            },
        ],
    }
    (tmp_path / "catalog.json").write_text(json.dumps(catalog))
    monkeypatch.setenv("SPECEXEC_CATALOG", str(tmp_path / "catalog.json"))
    code, events, _ = run_cli(["models", "download", "tiny-pair", "--json"], capsys)
    assert code == 0
    folders = {
        "target": str(hub_env.models_dir / "org--big-GPTQ@gptq-4bit"),
        "draft": str(hub_env.models_dir / "org--small"),
    }
    assert events[0]["folders"] == folders and events[-1] == {"event": "done", "folders": folders}
    assert_files(Path(folders["target"]), target_files)
    assert_files(Path(folders["draft"]), draft_files)
    assert read_manifest(Path(folders["target"])).commit == target.commit

    code, events, err = run_cli(["models", "download", "builtin"], capsys)
    assert code == 0 and "nothing to download" in err
    listing = json.loads(_list_json(capsys))
    pairs = {pair["id"]: pair["installed"] for pair in listing["pairs"]}
    assert pairs["tiny-pair"] is True
    assert main(["models", "delete", "org/small", "--yes"]) == 0  # a repo id names its folder
    assert not Path(folders["draft"]).exists()
    assert {p["id"]: p["installed"] for p in json.loads(_list_json(capsys))["pairs"]}["tiny-pair"] is False
    assert main(["models", "delete", "tiny-pair", "--yes"]) == 0  # a pair id: what is left of it
    assert not Path(folders["target"]).exists()


def _list_json(capsys) -> str:
    capsys.readouterr()
    main(["models", "list", "--json"])
    return capsys.readouterr().out


def test_kill_9_mid_file_then_resume_fetches_only_the_missing_bytes(hub, hub_env):
    hosted, files = small_repo(hub, big=8 << 20)
    hub.limit_rate(2 << 20)  # ~4 s for the big file: time to kill it in the middle, even on a busy machine
    command = [*MODELS_CLI, "download", "org/tiny", "--json"]
    process = subprocess.Popen(command, env=hub_env.env, stdout=subprocess.PIPE, text=True)
    partial = hub_env.models_dir / "org--tiny" / f"{BIG}.incomplete"
    try:
        for line in process.stdout:
            event = json.loads(line)
            if event["event"] == "progress" and event["file"].endswith(BIG) and event["done_bytes"] > 2 << 20:
                break
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=30)
        process.stdout.close()
    assert process.returncode == -signal.SIGKILL
    kept = partial.stat().st_size
    assert 0 < kept < len(files[BIG])
    hub.wait_idle()
    first_run = hub.bytes_served

    hub.limit_rate(None)
    hub.reset_counters()
    second = subprocess.run(command, env=hub_env.env, capture_output=True, text=True, timeout=60)
    assert second.returncode == 0, second.stderr
    events = [json.loads(line) for line in second.stdout.splitlines()]
    assert events[0]["already_bytes"] >= kept
    assert hub.bytes_served == events[0]["total_bytes"] - events[0]["already_bytes"]
    assert hub.bytes_served < sum(map(len, files.values())) and first_run + hub.bytes_served >= len(files[BIG])
    assert (BIG, f"bytes={kept}-") in hub.requests  # asked only for what was missing
    assert_files(hub_env.models_dir / "org--tiny", files)


def test_corrupted_file_is_fetched_again_and_twice_corrupted_is_an_error(hub, hub_env, capsys):
    _, files = small_repo(hub)
    hub.corrupt(BIG, times=1)
    code, events, _ = run_cli(["models", "download", "org/tiny", "--json"], capsys)
    assert code == 0
    big_checks = [e["ok"] for e in events if e["event"] == "verify" and e["file"].endswith(BIG)]
    assert big_checks == [False, True]
    assert hub.bytes_by_path[BIG] == 2 * len(files[BIG])
    assert_files(hub_env.models_dir / "org--tiny", files)

    small_repo(hub, "org/broken", seed=5)
    hub.corrupt(BIG, times=2)
    code, events, _ = run_cli(["models", "download", "org/broken", "--json"], capsys)
    assert code == 2 and events[-1]["event"] == "error" and events[-1]["kind"] == "verify"
    assert "corrupted twice" in events[-1]["message"]
    assert not (hub_env.models_dir / "org--broken" / BIG).exists()
    assert not (hub_env.models_dir / "org--broken" / f"{BIG}.incomplete").exists()


def test_too_little_disk_refuses_before_the_first_byte(hub, hub_env, capsys, monkeypatch):
    _, files = small_repo(hub)
    monkeypatch.setenv("SPECEXEC_DOWNLOAD_FREE_BYTES", str(10 << 20))
    code, events, _ = run_cli(["models", "download", "org/tiny", "--json"], capsys)
    assert code == 2 and [e["event"] for e in events] == ["error"]
    assert events[0]["kind"] == "disk"
    needed = format_bytes(sum(map(len, files.values())) + DownloadSettings().free_margin_bytes)
    assert f"needs {needed} free on {hub_env.models_dir}, has 10.0 MB" in events[0]["message"]
    assert hub.bytes_served == 0 and hub.requests == []
    code, _, err = run_cli(["models", "download", "org/tiny"], capsys)
    assert code == 2 and "not enough disk space" in err


def test_stall_reconnects_and_keeps_the_bytes(hub, hub_env):
    _, files = small_repo(hub)
    hub.stall_once(BIG, after_bytes=1 << 20, seconds=5)
    recorder = Recorder()
    started = time.monotonic()
    folder = fetch(hub_env, "org/tiny", recorder)
    assert time.monotonic() - started < 4  # reconnected after 0.5 s, did not wait out the stall
    retries = [event for event in recorder.events if event[0] == "retry"]
    assert len(retries) == 1 and retries[0][3] == "no byte for 0.5 s"
    assert_files(folder, files)
    resumed = [header for path, header in hub.requests if path == BIG]
    assert resumed[0] is None and resumed[1].startswith("bytes=") and resumed[1] != "bytes=0-"


def test_dropped_connection_resumes_and_a_server_ignoring_range_restarts(hub, hub_env):
    _, files = small_repo(hub)
    hub.drop_once(BIG, after_bytes=(2 << 20) + 100)
    hub.ignore_range()
    recorder = Recorder()
    folder = fetch(hub_env, "org/tiny", recorder)
    assert_files(folder, files)
    assert [event[0] for event in recorder.events].count("retry") == 1
    # The 200 answer to the Range request made it start over: the file went twice, minus what was lost.
    assert hub.bytes_by_path[BIG] == (2 << 20) + 100 + len(files[BIG])


def test_gated_repo_without_token_says_how_to_give_one_and_the_token_stays_off_the_cdn(
    hub, hub_env, capsys, monkeypatch
):
    _, files = small_repo(hub, "org/gated", gated=True, token="hf_right")
    code, events, _ = run_cli(["models", "download", "org/gated", "--json"], capsys)
    assert code == 2
    error = events[-1]
    assert error["event"] == "error" and error["kind"] == "gated"
    assert error["licence_url"] == "https://huggingface.co/org/gated"
    assert "https://huggingface.co/org/gated" in error["message"]
    assert "specexec models login" in error["message"] and "HF_TOKEN" in error["message"]
    assert [e["event"] for e in events] == ["error"]  # refused before the plan: no folder was made
    assert not (hub_env.models_dir / "org--gated").exists() and hub.bytes_served == 0

    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    code, events, _ = run_cli(["models", "download", "org/gated", "--json"], capsys)
    assert code == 2 and events[-1]["kind"] == "gated" and "refused" in events[-1]["message"]

    monkeypatch.setenv("HF_TOKEN", "hf_right")
    code, events, _ = run_cli(["models", "download", "org/gated", "--json"], capsys)
    assert code == 0
    assert_files(hub_env.models_dir / "org--gated", files)
    assert hub.cdn_authorization and set(hub.cdn_authorization) == {None}  # the CDN host never saw the token


def test_unknown_repo_revision_and_name_are_not_found(hub, hub_env, capsys):
    small_repo(hub)
    for args in (["org/nope"], ["org/tiny", "--revision", "v9"], ["not a repo"]):
        code, events, _ = run_cli(["models", "download", *args, "--json"], capsys)
        assert code == 2 and events[-1]["kind"] == "not_found", args


def test_cancel_keeps_partials_and_list_shows_the_unfinished_download(hub, hub_env, capsys):
    _, files = small_repo(hub, big=6 << 20)
    hub.limit_rate(2 << 20)  # ~3 s for the big file: progress (at most ~4 a second) arrives mid-file
    cancel = threading.Event()

    class CancelMidFile(Recorder):
        def progress(self, progress):
            if progress.file.endswith(BIG) and progress.done_bytes > 1 << 20:
                cancel.set()

    with pytest.raises(DownloadCancelledError):
        fetch(hub_env, "org/tiny", CancelMidFile(), cancel=cancel)
    partial = hub_env.models_dir / "org--tiny" / f"{BIG}.incomplete"
    assert 0 < partial.stat().st_size < len(files[BIG])
    listing = json.loads(_list_json(capsys))
    (model,) = listing["models"]
    assert model["repo"] == "org/tiny" and model["complete"] is False
    assert 0 < model["done_bytes"] < model["total_bytes"] == sum(map(len, files.values()))
    main(["models", "list"])
    assert "unfinished" in capsys.readouterr().out


def test_sigterm_cancels_with_exit_130_and_keeps_partials(hub, hub_env):
    _, files = small_repo(hub, big=6 << 20)
    hub.limit_rate(2 << 20)
    command = [*MODELS_CLI, "download", "org/tiny", "--json"]
    process = subprocess.Popen(command, env=hub_env.env, stdout=subprocess.PIPE, text=True)
    events = []
    for line in process.stdout:
        events.append(json.loads(line))
        if events[-1]["event"] == "progress" and events[-1]["done_bytes"] > 1 << 20:
            process.send_signal(signal.SIGTERM)
            break
    events += [json.loads(line) for line in process.stdout]
    assert process.wait(timeout=30) == 130
    assert events[-1]["event"] == "error" and events[-1]["kind"] == "cancelled"
    assert (hub_env.models_dir / "org--tiny" / f"{BIG}.incomplete").stat().st_size > 0


def test_model_manager_modules_never_import_torch():
    """The app's Qt process imports these; torch would cost it seconds and gigabytes."""
    code = (
        "import sys, core.models.download, core.models.hub, core.models.installed, core.models.importing, "
        "core.models.token_store, core.cli.models_download, core.cli.models_list; "
        "sys.exit(1 if 'torch' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_download_benchmark_runs_and_its_resume_fetches_exactly_the_missing_bytes(capsys, monkeypatch, tmp_path):
    import argparse

    from core.bench import download as bench

    monkeypatch.delenv("SPECEXEC_DOWNLOAD_FREE_BYTES", raising=False)
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    assert (
        bench.run(
            parser.parse_args(["--megabytes", "6", "--files", "2", "--repeats", "1", "--json", "--dir", str(tmp_path)])
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["resume_kept_bytes"] + result["resume_fetched_bytes"] == result["repo_bytes"]
    assert 0 < result["resume_fetched_bytes"] < result["repo_bytes"]
    assert result["raw_mb_per_s"] > 0 and result["download_mb_per_s"] > 0


def test_unreachable_hub_is_a_network_error(hub_env, capsys, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens there
    code, events, _ = run_cli(["models", "download", "org/tiny", "--json"], capsys)
    assert code == 2 and events[-1]["kind"] == "network" and "cannot reach the hub" in events[-1]["message"]


@pytest.mark.parametrize("endpoint", ["hf-mirror.com", "ftp://mirror.example", "https://", "file:///etc"])
def test_an_hf_endpoint_that_is_not_a_web_address_is_said_before_anything_is_asked(
    hub_env, capsys, monkeypatch, endpoint
):
    """A mirror written without its https:// was "cannot reach the hub at hf-mirror.com (UnsupportedProtocol)"."""
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    code, events, _ = run_cli(["models", "download", "org/tiny", "--json"], capsys)
    assert code == 2 and events[-1]["kind"] == "network"
    assert f"HF_ENDPOINT is {endpoint!r}, which is not a web address" in events[-1]["message"]
    assert "https://hf-mirror.com" in events[-1]["message"]


def test_an_hf_endpoint_with_spaces_around_it_is_the_hub_it_names(hub, hub_env, capsys, monkeypatch):
    _, files = small_repo(hub)
    monkeypatch.setenv("HF_ENDPOINT", f" {os.environ['HF_ENDPOINT']}/ \n")  # pasted with what was around it
    code, events, _ = run_cli(["models", "download", "org/tiny", "--json"], capsys)
    assert code == 0 and events[-1]["event"] == "done", events[-1]
    assert_files(hub_env.models_dir / "org--tiny", files)


def test_a_hub_gone_after_the_listing_gives_up_after_max_attempts(hub, hub_env):
    small_repo(hub)
    recorder = Recorder()
    listing = fetch_listing("org/tiny")
    hub.close()  # every connection for a file body is now refused
    folder = hub_env.models_dir / "org--tiny"
    settings = DownloadSettings(stall_timeout_s=0.5, connect_timeout_s=0.5, backoff_s=0.01, max_attempts=3)
    with pytest.raises(DownloadError, match="failed 3 times in a row"):
        download([DownloadJob(listing, folder)], hub_env.models_dir, recorder, settings=settings)
    assert [event[2] for event in recorder.events if event[0] == "retry"] == [1, 2, 3]
    assert read_manifest(folder).complete is False


def test_progress_is_throttled_to_about_four_events_a_second(hub, hub_env):
    _, files = small_repo(hub, big=3 << 20)
    hub.limit_rate(2 << 20)  # ~1.5 s, hundreds of 64 KiB writes
    recorder = Recorder()
    started = time.monotonic()
    folder = hub_env.models_dir / "org--tiny"
    download(
        [DownloadJob(fetch_listing("org/tiny"), folder)], hub_env.models_dir, recorder, settings=DownloadSettings()
    )  # the default interval, 0.25 s
    elapsed = time.monotonic() - started
    progress = [event for event in recorder.events if event[0] == "progress"]
    assert elapsed > 1.0 and 3 <= len(progress) <= 4 * elapsed + len(files) + 1
    assert [done for _, done in progress] == sorted(done for _, done in progress)  # never goes back
    assert_files(folder, files)


def test_a_new_commit_on_the_branch_refetches_only_the_changed_files(hub, hub_env, capsys):
    first, files = small_repo(hub)
    assert run_cli(["models", "download", "org/tiny", "--json"], capsys)[0] == 0
    changed = {**files, BIG: payload(len(files[BIG]), seed=9)}
    second = hub.add_repo("org/tiny", changed)
    assert second.commit != first.commit
    hub.reset_counters()
    code, events, _ = run_cli(["models", "download", "org/tiny", "--json"], capsys)
    # The changed file has the same size: it is hashed, found different and fetched again.
    assert events[0] == {"event": "check", "file": f"org--tiny/{BIG}", "ok": False}
    plan = next(event for event in events if event["event"] == "plan")
    assert code == 0 and plan["already_bytes"] == plan["total_bytes"] - len(changed[BIG])
    assert hub.bytes_served == len(changed[BIG])
    folder = hub_env.models_dir / "org--tiny"
    assert_files(folder, changed)
    assert read_manifest(folder).commit == second.commit
