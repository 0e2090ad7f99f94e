"""`specexec models download PAIR_OR_REPO`: fetch a catalog pair (target and draft) or one hub repo into the
models folder, resumably and verified.

Exit status: 0 done, 2 error, 75 already downloading (another process holds the model folder; nothing was
touched), 130 cancelled (Ctrl+C or SIGTERM; partial files are kept, a rerun resumes). With --json, stdout
carries one JSON object per line (`plan`, `check`, `attach`, `progress`, `verify`, `retry`, `error`, `done`),
a contract the app's download wizard parses; every failure ends in an `error` event with a `kind`.
"""

from __future__ import annotations

import argparse
import signal
import sys
import traceback
from pathlib import Path

EXIT_OK, EXIT_ERROR, EXIT_BUSY, EXIT_CANCELLED = 0, 2, 75, 130  # 75: EX_TEMPFAIL, "try again later"
# Seconds a cancelled download may take to close its files (it stops at its next chunk; the app waits 10 s
# before it kills the process).
CANCEL_GRACE_S = 5.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "name",
        metavar="PAIR_OR_REPO",
        help="a pair id from `specexec models list` (downloads target and draft) or a hub repo id",
    )
    parser.add_argument("--revision", default=None, help="branch, tag or commit of a repo id (default: main)")
    parser.add_argument("--dir", default=None, help="models folder to download into (default: the app's)")
    parser.add_argument("--json", action="store_true", help="one JSON event per line on stdout (for programs)")
    parser.add_argument(
        "--attach",
        action="store_true",
        help="when another process is downloading the same model, show its progress (and go on "
        "by itself if that one stops) instead of exiting with status 75",
    )
    parser.epilog = (
        "exit status: 0 done, 2 error, 75 already downloading in another process (one download per "
        "model folder), 130 cancelled (partial files are kept: run the same command to resume)"
    )


def run(args: argparse.Namespace) -> int:
    from core.cli.download_output import HumanListener, JsonLinesListener, emit, folders_field
    from core.errors import DownloadBusyError, DownloadCancelledError, DownloadError, GatedModelError, SpecExecError

    listener = JsonLinesListener() if args.json else HumanListener()
    previous = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM cancels like Ctrl+C: partials are kept
    try:
        folders = _download_until_interrupted(args, listener)
    except (KeyboardInterrupt, DownloadCancelledError):
        message = "download cancelled; the partial files are kept: run the same command again to resume"
        _report_error(args.json, "cancelled", message, listener)
        return EXIT_CANCELLED
    except GatedModelError as error:
        _report_error(args.json, "gated", str(error), listener, licence_url=error.licence_url)
        return EXIT_ERROR
    except DownloadBusyError as error:
        _report_error(args.json, "busy", str(error), listener, folder=str(error.folder), pid=error.pid)
        return EXIT_BUSY
    except DownloadError as error:
        _report_error(args.json, error.kind, str(error), listener)
        return EXIT_ERROR
    except SpecExecError as error:  # an unknown pair or repo id, an unreadable catalog
        _report_error(args.json, "not_found", str(error), listener)
        return EXIT_ERROR
    except OSError as error:  # the models folder cannot be made or read (before the downloader runs)
        where = f" ({error.filename})" if error.filename else ""
        _report_error(
            args.json,
            "io",
            f"cannot use the models folder: {error.strerror or type(error).__name__}{where}; choose another with --dir",
            listener,
        )
        return EXIT_ERROR
    except Exception as error:  # noqa: BLE001 - a defect: said in an event; the stack (no message) to stderr
        _report_error(
            args.json,
            "internal",
            f"the download stopped on an unexpected {type(error).__name__}; "
            "please report it with the log. Running the same command again resumes.",
            listener,
        )
        print("".join(traceback.format_tb(error.__traceback__)), file=sys.stderr)
        return EXIT_ERROR
    finally:
        signal.signal(signal.SIGTERM, previous)
    if args.json:
        emit("done", **folders_field(folders))
    else:
        listener.finish()
        _print_done(folders)
    return EXIT_OK


def _download_until_interrupted(args: argparse.Namespace, listener) -> dict[str, Path]:
    """`_download` on a thread of its own, while this (the main) thread only waits for it: Ctrl+C and SIGTERM
    raise KeyboardInterrupt in the main thread at whatever it is doing, and raised inside the downloader's
    queues and locks it could leave them inconsistent and the process waiting forever (a test saw a SIGTERM
    never end the process, once, on a loaded machine). Here it interrupts a join: the downloader is told to
    stop (it does at its next chunk, closing its files) and given CANCEL_GRACE_S; a connection stalled longer
    is left behind (the partial file holds what was written; a resume hashes it again). Raises what
    `_download` raises, and DownloadCancelledError."""
    import threading

    from core.errors import DownloadCancelledError

    cancel = threading.Event()
    outcome: dict[str, object] = {}

    def work() -> None:
        try:
            outcome["folders"] = _download(args, listener, cancel)
        except BaseException as error:  # noqa: BLE001 - raised again in the main thread
            outcome["error"] = error

    worker = threading.Thread(target=work, name="download", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.5)
    except KeyboardInterrupt:
        cancel.set()
        worker.join(CANCEL_GRACE_S)
        raise DownloadCancelledError("cancelled") from None
    if "error" in outcome:
        raise outcome["error"]
    return outcome["folders"]


def _download(args: argparse.Namespace, listener, cancel) -> dict[str, Path]:
    """Resolve the name, list the files on the hub, download (until `cancel` is set); returns the folders by
    role."""
    from core.models.catalog import load_catalog
    from core.models.download import download
    from core.models.download_jobs import download_jobs, wanted_repos
    from core.system.locations import models_dir
    from core.models.token_store import current_token

    root = Path(args.dir).expanduser() if args.dir else models_dir()
    wanted = wanted_repos(args.name, args.revision, load_catalog())
    if not wanted:
        print(
            f"'{args.name}' ships with the app: nothing to download. Use it with "
            "`--target builtin --draft builtin-draft`.",
            file=sys.stderr,
        )
        return {}
    token = current_token()
    jobs = download_jobs(wanted, root, token)
    download(jobs, root, listener, cancel, token=token, follow_running=args.attach)
    return {job.label: job.folder for job in jobs}


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _report_error(as_json: bool, kind: str, message: str, listener, **extra) -> None:
    from core.cli.download_output import emit

    if as_json:
        emit("error", kind=kind, message=message, **extra)
    else:
        listener.finish()
        print(f"error: {message}", file=sys.stderr)


def _print_done(folders: dict[str, Path]) -> None:
    if not folders:
        return
    for label, folder in folders.items():
        print(f"{label}: {folder}")
    if {"target", "draft"} <= set(folders):
        print(f"Run it with: specexec chat --target '{folders['target']}' --draft '{folders['draft']}'")
    else:
        print(f"Use it with: specexec chat --target '{folders['model']}' (and a draft model)")
