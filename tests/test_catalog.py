"""The shipped catalog reads, holds the pairs the product promises, and bad catalogs fail in plain words."""

from __future__ import annotations

import json

import pytest

from core.errors import CatalogError
from core.models.catalog import BUILTIN_PAIR_ID, load_catalog
from core.models.locations import models_dir, repo_folder_name


def test_shipped_catalog_has_the_promised_pairs() -> None:
    catalog = load_catalog()
    repos = {pair.target.repo for pair in catalog.pairs}
    assert {"TheBloke/Llama-2-70B-Chat-GPTQ", "Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4"} <= repos
    assert any("Llama-3.1-70B" in repo for repo in repos)
    assert any("Mixtral" in repo for repo in repos)
    builtin = catalog.pair(BUILTIN_PAIR_ID)
    assert builtin.target.is_builtin and builtin.download_bytes == 0
    paper = catalog.pair("llama2-70b-chat-gptq")
    assert paper.gated and paper.download_bytes > 40e9 and paper.licence_url.startswith("https://")


def test_unknown_pair_names_the_known_ones() -> None:
    with pytest.raises(CatalogError, match="known: builtin"):
        load_catalog().pair("no-such-pair")


def test_wrong_schema_and_broken_entries_are_clear(tmp_path) -> None:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"schema_version": 99, "pairs": []}))
    with pytest.raises(CatalogError, match="schema version 99"):
        load_catalog(path)
    path.write_text(json.dumps({"schema_version": 1, "pairs": [{"id": "x"}]}))
    with pytest.raises(CatalogError, match="malformed pair entry"):
        load_catalog(path)
    with pytest.raises(CatalogError, match="missing"):
        load_catalog(tmp_path / "absent.json")


def test_models_folder_and_folder_names(tmp_path) -> None:
    assert models_dir({"SPECEXEC_MODELS_DIR": str(tmp_path / "m")}) == tmp_path / "m"
    assert models_dir({"SPECEXEC_DATA_DIR": str(tmp_path)}) == tmp_path / "models"
    assert repo_folder_name("TheBloke/X-GPTQ") == "TheBloke--X-GPTQ"
    assert repo_folder_name("TheBloke/X-GPTQ", "gptq-3bit-128g") == "TheBloke--X-GPTQ@gptq-3bit-128g"
