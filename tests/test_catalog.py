"""The shipped catalog reads, holds the pairs the product promises, and bad catalogs fail in plain words."""

from __future__ import annotations

import json

import pytest

from core.errors import CatalogError
from core.models.catalog import BUILTIN_PAIR_ID, catalog_path, load_catalog
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
    assert not paper.gated and paper.download_bytes > 39e9 and paper.licence_url.startswith("https://")
    assert paper.with_draft("16bit").gated and paper.with_draft("16bit").download_bytes > 48e9


def test_big_pairs_draft_in_4_bits_and_offer_the_16bit_original() -> None:
    """Each big pair's own draft is a published 4-bit GPTQ checkpoint, with what was checked written down; the
    16-bit original stays as an option; every acceptance table names the draft it was measured with."""
    raw = {entry["id"]: entry for entry in json.loads(catalog_path().read_text())["pairs"]}
    for pair in load_catalog().pairs:
        for option in pair.drafts:
            assert option.acceptance is None or option.acceptance.draft == option.model.repo, (pair.id, option.id)
        if pair.id == BUILTIN_PAIR_ID:
            continue
        assert pair.draft_id == "4bit" and pair.draft.weights.bits == 4 and pair.draft.approx_bytes < 6e9
        assert "checked" in raw[pair.id]["draft"] and raw[pair.id]["draft"]["checked"].startswith("Stored copies")
        [sixteen] = pair.draft_options
        assert sixteen.id == "16bit" and sixteen.model.weights.bits is None and sixteen.label
        swapped = pair.with_draft("16bit")
        assert swapped.draft == sixteen.model and swapped.acceptance == sixteen.acceptance
        assert [o.id for o in swapped.draft_options] == ["4bit"] and swapped.with_draft("4bit") == pair
    with pytest.raises(CatalogError, match="has no draft 'fp8'; it has: 4bit, 16bit"):
        load_catalog().pair("llama2-70b-chat-gptq").with_draft("fp8")


def test_a_draft_id_named_twice_is_refused(tmp_path) -> None:
    data = json.loads(catalog_path().read_text())
    pair = next(entry for entry in data["pairs"] if entry["id"] == "llama2-70b-chat-gptq")
    pair["draft_options"][0]["id"] = "4bit"
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CatalogError, match="names a draft id twice"):
        load_catalog(path)


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


def test_models_list_shows_each_pairs_drafts_and_which_are_installed(tmp_path, capsys) -> None:
    from core.cli.main import main

    draft = tmp_path / repo_folder_name("meta-llama/Llama-2-7b-chat-hf")
    draft.mkdir()
    (draft / "config.json").write_text("{}")  # an imported folder: complete without a download manifest
    assert main(["models", "list", "--json", "--dir", str(tmp_path)]) == 0
    pairs = {pair["id"]: pair for pair in json.loads(capsys.readouterr().out)["pairs"]}
    assert [(d["id"], d["repo"]) for d in pairs["llama2-70b-chat-gptq"]["drafts"]] == [
        ("4bit", "TheBloke/Llama-2-7B-Chat-GPTQ"), ("16bit", "meta-llama/Llama-2-7b-chat-hf")]
    assert pairs["builtin"]["drafts"][0]["installed"] is True
    assert [d["installed"] for d in pairs["llama2-70b-chat-gptq"]["drafts"]] == [False, True]
