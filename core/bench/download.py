"""`specexec bench download`: the resumable downloader's speed against the loopback hub's raw rate, and the
bytes a resume saves.

A loopback hub (core/bench/loopback_hub.py) serves a repo of `--megabytes` in `--files` LFS files (each a
302 to the "CDN" path, as on the hub), each response paced to `--link-mb-per-s` (a network line; 0 for none,
then loopback runs at memory speed, faster than one core can hash). In the same process, alternating
`--repeats` times:
- raw: a bare streaming GET of every file, bytes read and thrown away (the ceiling of server + HTTP client);
- download: `core.models.download.download` into a fresh folder (Range, checksums while streaming, writes
  to disk, fsync, rename), from the hub listing onward.
Then the resume: a download cancelled half way, resumed; the bytes the server sent for the resume against
the whole repo (huggingface_hub's own downloader would send all of it again). sha256 alone is timed too,
because hashing while streaming bounds the downloader on a link faster than one core hashes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
import threading
import time
from pathlib import Path

MB = 1e6


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--megabytes", type=int, default=300, help="size of the served repo in MB (default 300)")
    parser.add_argument("--files", type=int, default=3, help="LFS files the repo is split into (default 3)")
    parser.add_argument("--repeats", type=int, default=2, help="raw/download rounds; the best of each is kept")
    parser.add_argument(
        "--link-mb-per-s",
        type=float,
        default=125.0,
        help="pace each response to this many MB/s, a network line (default 125: 1 Gbit/s; "
        "0: no pacing, loopback at memory speed)",
    )
    parser.add_argument("--dir", default=None, help="folder to download into (default: a temporary folder)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from core.bench.loopback_hub import LoopbackHub, payload
    from core.models.download import DownloadJob, download
    from core.models.download_progress import DownloadListener
    from core.models.hub import fetch_listing
    from core.system.env import variables_set

    size = args.megabytes * 1_000_000 // args.files
    files = {"config.json": b'{"model_type": "llama"}'}
    files.update(
        {f"model-{i + 1:05d}-of-{args.files:05d}.safetensors": payload(size, seed=i) for i in range(args.files)}
    )
    total = sum(map(len, files.values()))
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="specexec-bench-download-"))
    with LoopbackHub() as hub, variables_set({"HF_ENDPOINT": hub.url}):
        try:
            hub.add_repo("bench/model", files)
            hub.limit_rate(args.link_mb_per_s * MB if args.link_mb_per_s > 0 else None)
            raw_times, download_times = [], []
            for round_number in range(args.repeats):
                raw_times.append(_raw_fetch_seconds(hub, fetch_listing("bench/model")))
                target = work / f"round-{round_number}"
                started = time.perf_counter()
                download([DownloadJob(fetch_listing("bench/model"), target / "model")], target)
                download_times.append(time.perf_counter() - started)
                shutil.rmtree(target)

            cancel = threading.Event()

            class StopHalfWay(DownloadListener):
                def progress(self, progress) -> None:
                    if progress.done_bytes >= total // 2:
                        cancel.set()

            target = work / "resume"
            job = DownloadJob(fetch_listing("bench/model"), target / "model")
            from core.errors import DownloadCancelledError

            try:
                download([job], target, StopHalfWay(), cancel=cancel)
            except DownloadCancelledError:
                pass
            hub.wait_idle()
            kept = sum(
                p.stat().st_size
                for p in (target / "model").rglob("*")
                if p.is_file() and p.name != "specexec-download.json"
            )
            hub.reset_counters()
            started = time.perf_counter()
            download([job], target)
            resume_seconds = time.perf_counter() - started
            resumed_bytes = hub.bytes_served
            shutil.rmtree(target)
        finally:
            if not args.dir:
                shutil.rmtree(work, ignore_errors=True)
    block = files[next(iter(files.keys() - {"config.json"}))]
    started = time.perf_counter()
    hashlib.sha256(block).hexdigest()
    sha_rate = len(block) / (time.perf_counter() - started)

    raw_rate, download_rate = total / min(raw_times), total / min(download_times)
    result = {
        "repo_bytes": total,
        "files": args.files,
        "repeats": args.repeats,
        "link_mb_per_s": args.link_mb_per_s,
        "raw_mb_per_s": round(raw_rate / MB, 1),
        "download_mb_per_s": round(download_rate / MB, 1),
        "download_vs_raw": round(download_rate / raw_rate, 3),
        "sha256_mb_per_s": round(sha_rate / MB, 1),
        "resume_kept_bytes": kept,
        "resume_fetched_bytes": resumed_bytes,
        "resume_saved_fraction": round(1 - resumed_bytes / total, 3),
        "resume_seconds": round(resume_seconds, 2),
    }
    if args.json:
        print(json.dumps(result))
        return 0
    link = f"paced to {args.link_mb_per_s:g} MB/s" if args.link_mb_per_s > 0 else "unpaced"
    print(f"repo: {total / MB:.0f} MB in {args.files} LFS files, served on loopback ({link}); best of {args.repeats}")
    print(f"raw GET (read and discard):        {result['raw_mb_per_s']:8.1f} MB/s")
    print(
        f"download (Range, checksum, disk):  {result['download_mb_per_s']:8.1f} MB/s"
        f"   = {result['download_vs_raw']:.2f} x raw"
    )
    print(f"sha256 alone (one core):           {result['sha256_mb_per_s']:8.1f} MB/s")
    print(
        f"resume after a cancel at half way: fetched {resumed_bytes / MB:.1f} MB of {total / MB:.1f} MB "
        f"({kept / MB:.1f} MB kept on disk; saved {100 * result['resume_saved_fraction']:.0f}%), "
        f"in {resume_seconds:.2f} s including re-hashing the kept part"
    )
    return 0


def _raw_fetch_seconds(hub, remote) -> float:
    """Seconds to GET every file and throw the bytes away: the ceiling for any client of this server."""
    import requests

    from core.models.hub import file_url

    started = time.perf_counter()
    with requests.Session() as session:
        for file in remote.files:
            with session.get(
                file_url(remote.repo, remote.commit, file.path), stream=True, headers={"Accept-Encoding": "identity"}
            ) as response:
                response.raise_for_status()
                for _ in response.iter_content(1 << 20):
                    pass
    return time.perf_counter() - started
