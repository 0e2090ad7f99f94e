"""The curated catalog of model pairs (`resources/catalog.json`): what to download for each pair, and what
it needs. Pure data: the CLI, the fit prediction and the app's wizard all read this one file.

A pair's `draft` is its default draft (a 4-bit one for the big pairs: it leaves ~9-10 GB more of a 24 GB card
to the target); `draft_options` are the others a person may pick instead (the 16-bit original), each with
the acceptance table measured with it. `Pair.with_draft(id)` is the pair with another draft as its own, so
the fit, the downloads and the app need no second code path.

A pair's `role` is "calibration" for the SpecExec paper's own pair (Llama 2 70B), kept to check the speed
model against the paper's rows but never recommended first. `retired_pairs` are the pairs earlier versions
offered (Llama 3.1 70B, Mixtral 8x7B, Qwen2.5 32B): no longer shown or recommended (`Catalog.pairs` leaves
them out), but still found by id (`Catalog.pair`), so a download of one resumes, `models delete <id>`
works, and the app still names a retired pair someone already uses; its folders load as they always did.

Quantised models describe their stored layout under "quantized" (method gptq / awq / compressed-tensors,
bits, group size, act-order), the older entries under "gptq": both size the same GPTQ layout the engine
converts every format into.

SPECEXEC_CATALOG points at another catalog file (tests, and people who curate their own list).
"""

from __future__ import annotations

import json
import os
import reprlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from core.errors import CatalogError
from core.models.acceptance import Acceptance
from core.planning.sizes import ModelShape, WeightFormat
from core.system import json_text
from core.system.env import CATALOG_ENV

SCHEMA_VERSION = 1
DEFAULT_CATALOG = Path(__file__).resolve().parent.parent.parent / "resources" / "catalog.json"
BUILTIN_PAIR_ID = "builtin"


@dataclass(frozen=True)
class ModelRef:
    """One model of a pair: a hub repo at a revision (a GPTQ branch), or 'builtin' / 'builtin-draft'."""

    repo: str
    revision: str
    quantization: str
    approx_bytes: int
    # What the fit prediction sizes it by: config.json's shape fields, and how the weights are stored
    # (GPTQ bits / group size / act-order, or the 16-bit dtype of the checkpoint).
    shape: ModelShape
    weights: WeightFormat = WeightFormat()
    gated: bool = False  # the hub asks for accepted licence terms and a token before the download

    @property
    def is_builtin(self) -> bool:
        return self.repo in ("builtin", "builtin-draft")


@dataclass(frozen=True)
class DraftOption:
    """A draft a pair can run with: `id` (stable, e.g. "4bit", "16bit"), `label` (words for people), the model
    and the acceptance table measured with it (None: none)."""

    id: str
    label: str
    model: ModelRef
    acceptance: Acceptance | None = None


@dataclass(frozen=True)
class Pair:
    """A target and the draft that speeds it up, with what a person needs to know before downloading."""

    id: str
    name: str
    summary: str
    target: ModelRef
    draft: ModelRef
    licence: str
    licence_url: str
    gated: bool
    context_length: int
    min_ram_gb: float
    min_vram_gb: float
    acceptance: Acceptance | None = None  # measured tokens per target pass by tree budget, with `draft`
    draft_id: str = "default"
    draft_label: str = ""
    draft_options: tuple[DraftOption, ...] = ()  # other drafts the model manager may pick
    calibration: bool = False  # the paper's pair: kept for checking the speed model, never recommended first
    retired: str = ""  # why an earlier version's pair is no longer offered, and what replaces it

    @property
    def download_bytes(self) -> int:
        """Approximate bytes to fetch (0 for the built-in pair, which ships with the app)."""
        return sum(model.approx_bytes for model in (self.target, self.draft) if not model.is_builtin)

    @property
    def drafts(self) -> tuple[DraftOption, ...]:
        """Every draft of the pair, its own first."""
        return (DraftOption(self.draft_id, self.draft_label, self.draft, self.acceptance), *self.draft_options)

    def with_draft(self, draft_id: str) -> "Pair":
        """This pair with the draft `draft_id` as its own (the others become its options).

        Raises CatalogError naming the drafts the pair has."""
        drafts = self.drafts
        chosen = next((option for option in drafts if option.id == draft_id), None)
        if chosen is None:
            raise CatalogError(
                f"pair '{self.id}' has no draft '{draft_id}'; it has: {', '.join(option.id for option in drafts)}"
            )
        return replace(
            self,
            draft=chosen.model,
            acceptance=chosen.acceptance,
            draft_id=chosen.id,
            draft_label=chosen.label,
            draft_options=tuple(o for o in drafts if o is not chosen),
            gated=self.target.gated or chosen.model.gated,
        )


@dataclass(frozen=True)
class Catalog:
    schema_version: int
    pairs: tuple[Pair, ...]  # the pairs offered
    retired: tuple[Pair, ...] = ()  # pairs earlier versions offered: found by id, never offered

    def pair(self, pair_id: str) -> Pair:
        """The pair with this id, offered or retired. Raises CatalogError naming the offered ids."""
        for pair in (*self.pairs, *self.retired):
            if pair.id == pair_id:
                return pair
        raise CatalogError(f"no model pair '{pair_id}' in the catalog; known: {', '.join(p.id for p in self.pairs)}")

    def has(self, pair_id: str) -> bool:
        return any(pair.id == pair_id for pair in (*self.pairs, *self.retired))


def catalog_path() -> Path:
    override = os.environ.get(CATALOG_ENV)
    return Path(override).expanduser() if override else DEFAULT_CATALOG


def load_catalog(path: Path | None = None) -> Catalog:
    """Read and check the catalog. Raises CatalogError with the file and the field at fault."""
    source = path or catalog_path()
    try:
        data = json_text.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise CatalogError(f"the model catalog {source} is missing: reinstall the app") from error
    except (OSError, json.JSONDecodeError) as error:
        raise CatalogError(f"the model catalog {source} cannot be read: {error}") from error
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        found = data.get("schema_version") if isinstance(data, dict) else None
        raise CatalogError(
            f"the model catalog {source} has schema version {found!r}; this program reads version {SCHEMA_VERSION}"
        )
    try:
        pairs = tuple(_pair(entry) for entry in data["pairs"])
        retired = tuple(_pair(entry) for entry in data.get("retired_pairs", ()))
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, ZeroDivisionError) as error:
        said = f"{error} is missing" if isinstance(error, KeyError) else str(error)
        raise CatalogError(f"the model catalog {source} has a malformed pair entry: {said}") from error
    ids = [pair.id for pair in (*pairs, *retired)]
    if len(set(ids)) != len(ids):
        raise CatalogError(f"the model catalog {source} lists a pair id twice: {ids}")
    if BUILTIN_PAIR_ID not in ids:  # the pair every machine can run, offered where nothing else fits
        raise CatalogError(f"the model catalog {source} has no '{BUILTIN_PAIR_ID}' pair: reinstall the app")
    if any(not pair.retired for pair in retired) or any(pair.retired for pair in pairs):
        raise CatalogError(f"the model catalog {source} needs a 'retired' reason on exactly the retired pairs")
    return Catalog(schema_version=SCHEMA_VERSION, pairs=pairs, retired=retired)


QUANTIZED_METHODS = ("gptq", "awq", "compressed-tensors")
QUANTIZED_BITS = (2, 3, 4, 8)


def _number(value: Any, name: str, *, whole: bool = True, zero: bool = False) -> float:
    """`value` if it is a number above 0 (or 0 itself where `zero`; a whole one where `whole`) below 2^63;
    raises ValueError naming it."""
    typed = json_text.is_whole(value) if whole else json_text.is_number(value)
    if not (typed and (value >= 0 if zero else value > 0) and value < 2**63):  # NaN fails the comparisons
        least = "0 or more" if zero else "above 0"
        raise ValueError(f"{name} is {reprlib.repr(value)} where a {'whole ' if whole else ''}number {least} is due")
    return value


def _model(entry: dict) -> ModelRef:
    quantized = entry.get("quantized") or entry.get("gptq")
    if entry.get("quantized") and entry["quantized"].get("method") not in QUANTIZED_METHODS:
        raise ValueError(f"{entry.get('repo')!r}: quantized.method must be one of {', '.join(QUANTIZED_METHODS)}")
    if quantized and quantized.get("bits") not in QUANTIZED_BITS:
        raise ValueError(f"{entry.get('repo')!r}: quantized.bits must be one of {QUANTIZED_BITS}")
    shape = ModelShape.from_config(entry["config"])  # the fit sizes every model by it
    for name in ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "vocab_size"):
        _number(getattr(shape, name), f"{entry.get('repo')!r}: config.{name}")
    weights = (
        WeightFormat(
            bits=int(quantized["bits"]),
            group_size=int(quantized["group_size"]),
            desc_act=bool(quantized["desc_act"]),
        )
        if quantized
        else WeightFormat(dtype=str(entry.get("dtype", "float16")))
    )
    return ModelRef(
        repo=str(entry["repo"]),
        revision=str(entry.get("revision") or ""),
        quantization=str(entry["quantization"]),
        approx_bytes=int(_number(entry["approx_bytes"], "approx_bytes")),
        shape=shape,
        weights=weights,
        gated=bool(entry.get("gated", False)),
    )


def _draft_option(entry: dict) -> DraftOption:
    return DraftOption(
        id=str(entry["id"]),
        label=str(entry.get("label", "")),
        model=_model(entry["model"]),
        acceptance=Acceptance.from_dict(entry["acceptance"]) if "acceptance" in entry else None,
    )


def _pair(entry: dict) -> Pair:
    draft = entry["draft"]
    options = tuple(_draft_option(option) for option in entry.get("draft_options", ()))
    ids = [str(draft.get("id", "default")), *(option.id for option in options)]
    if len(set(ids)) != len(ids):
        raise ValueError(f"pair {entry.get('id')!r} names a draft id twice: {ids}")
    return Pair(
        id=str(entry["id"]),
        name=str(entry["name"]),
        summary=str(entry.get("summary", "")),
        target=_model(entry["target"]),
        draft=_model(entry["draft"]),
        licence=str(entry["licence"]),
        licence_url=str(entry.get("licence_url", "")),
        gated=bool(entry["gated"]),
        context_length=int(_number(entry["context_length"], "context_length")),
        min_ram_gb=float(_number(entry["min_ram_gb"], "min_ram_gb", whole=False)),
        min_vram_gb=float(_number(entry["min_vram_gb"], "min_vram_gb", whole=False, zero=True)),
        acceptance=Acceptance.from_dict(entry["acceptance"]) if "acceptance" in entry else None,
        draft_id=ids[0],
        draft_label=str(draft.get("label", "")),
        draft_options=options,
        calibration=entry.get("role") == "calibration",
        retired=str(entry.get("retired", "")),
    )
