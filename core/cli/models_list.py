"""`specexec models list [--json]`: the models in the models folder (with unfinished downloads and their
progress) and the catalog's pairs, each marked installed when both of its models are complete."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default=None, help="models folder (default: the app's)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (for programs)")


def run(args: argparse.Namespace) -> int:
    from core.models.catalog import load_catalog
    from core.planning.sizes import format_bytes
    from core.models.installed import pair_folders, scan_models
    from core.system.locations import models_dir, repo_folder_name

    root = Path(args.dir).expanduser() if args.dir else models_dir()
    models = scan_models(root)
    complete = {model.name for model in models if model.complete}
    catalog = load_catalog()
    pairs = []
    for pair in catalog.pairs:
        folders = pair_folders(catalog, pair.id)
        drafts = [
            {
                "id": option.id,
                "label": option.label,
                "repo": option.model.repo,
                "revision": option.model.revision,
                "download_bytes": 0 if option.model.is_builtin else option.model.approx_bytes,  # as the pair's
                "installed": option.model.is_builtin
                or repo_folder_name(option.model.repo, option.model.revision) in complete,
            }
            for option in pair.drafts
        ]  # the pair's own draft first, then the others it offers
        pairs.append(
            {
                "id": pair.id,
                "name": pair.name,
                "download_bytes": pair.download_bytes,
                "installed": all(folder in complete for folder in folders),
                "folders": [str(root / folder) for folder in folders],
                "drafts": drafts,
            }
        )
    if args.json:
        entries = [{**asdict(model), "path": str(model.path)} for model in models]
        print(json.dumps({"models_dir": str(root), "models": entries, "pairs": pairs}, indent=1))
        return 0
    print(f"Models folder: {root}")
    if not models:
        print("  (empty: `specexec models download PAIR` fetches a pair)")
    for model in models:
        if model.complete:
            state = format_bytes(model.done_bytes)
        else:
            percent = 100 * model.done_bytes / model.total_bytes if model.total_bytes else 0
            state = (
                f"unfinished: {format_bytes(model.done_bytes)} of {format_bytes(model.total_bytes)} "
                f"({percent:.0f}%), `specexec models download {model.repo}` resumes it"
            )
        origin = f"  [{model.repo}@{model.revision}]" if model.repo else ("  [link]" if model.linked else "")
        print(f"  {model.name}  {state}{origin}\n    {model.path}")
    print("Pairs:")
    width = max(len(pair["id"]) for pair in pairs) + 2  # one column for the ids, however long
    for pair in pairs:
        if pair["id"] == "builtin":
            mark = "" if "built-in" in pair["name"] else "  (built-in)"  # the catalog's name says it already
        else:
            mark = (
                "  (installed)" if pair["installed"] else f"  (not installed, {format_bytes(pair['download_bytes'])})"
            )
        print(f"  {pair['id']:<{width}}{pair['name']}{mark}")
    return 0
