"""The shipped catalog reads, holds the pairs the product promises, and bad catalogs fail in plain words."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from conftest import run_cli
from core.errors import CatalogError
from core.models.catalog import BUILTIN_PAIR_ID, catalog_path, load_catalog
from core.system.locations import models_dir, repo_folder_name
from json_mutation import DELETE, mutated_json, with_node


PROMISED = {  # issue 32: the models people run with offloading in 2026, and the paper's calibration pair
    "llama3.3-70b-instruct-awq": "Llama-3.3-70B",
    "deepseek-r1-distill-llama-70b-awq": "DeepSeek-R1-Distill-Llama-70B",
    "qwen2.5-72b-instruct-gptq": "Qwen2.5-72B",
    "qwen3-32b-awq": "Qwen3-32B",
    "llama2-70b-chat-gptq": "Llama-2-70B",
}
RETIRED = ("llama3.1-70b-instruct-gptq", "mixtral-8x7b-instruct-gptq", "qwen2.5-32b-instruct-gptq")


def test_shipped_catalog_has_the_promised_pairs() -> None:
    catalog = load_catalog()
    assert [pair.id for pair in catalog.pairs] == [BUILTIN_PAIR_ID, *PROMISED]
    for pair_id, name in PROMISED.items():
        assert name.lower() in catalog.pair(pair_id).target.repo.lower(), pair_id
    builtin = catalog.pair(BUILTIN_PAIR_ID)
    assert builtin.target.is_builtin and builtin.download_bytes == 0
    paper = catalog.pair("llama2-70b-chat-gptq")
    assert paper.calibration and not any(pair.calibration for pair in catalog.pairs if pair is not paper)
    assert not paper.gated and paper.download_bytes > 39e9 and paper.licence_url.startswith("https://")
    assert paper.with_draft("16bit").gated and paper.with_draft("16bit").download_bytes > 48e9
    # the targets are published in the formats people download in 2026
    quantizations = {catalog.pair(pair_id).target.quantization.split("-")[0] for pair_id in PROMISED}
    assert quantizations == {"awq", "gptq"}


def test_retired_pairs_are_not_offered_but_still_found_by_id() -> None:
    """What someone downloaded with an earlier version stays theirs: the pair is found by id (downloads resume,
    `models delete <id>` works, the app still names it), it is never offered, and it says what replaces it."""
    catalog = load_catalog()
    assert [pair.id for pair in catalog.retired] == list(RETIRED)
    for pair_id in RETIRED:
        pair = catalog.pair(pair_id)
        assert catalog.has(pair_id) and pair not in catalog.pairs and pair.retired
    assert "llama3.3-70b-instruct-awq" in catalog.pair("llama3.1-70b-instruct-gptq").retired
    assert all(not pair.retired for pair in catalog.pairs)


def test_every_entry_says_what_was_read_for_it() -> None:
    """Each new model names the stored hub pages it was read from (or says none was found), and each acceptance
    table says whether it was measured, published, or estimated from a named neighbour."""
    raw = {entry["id"]: entry for entry in json.loads(catalog_path().read_text())["pairs"]}
    for pair_id in ("llama3.3-70b-instruct-awq", "deepseek-r1-distill-llama-70b-awq", "qwen3-32b-awq"):
        entry = raw[pair_id]
        models = [entry["target"], entry["draft"], *(option["model"] for option in entry.get("draft_options", ()))]
        for model in models:
            assert model.get("checked", "").startswith(("Stored copies", "No stored copy")), (pair_id, model["repo"])
        tables = [entry["acceptance"], *(option["acceptance"] for option in entry.get("draft_options", ()))]
        assert all(table["source"].startswith("estimated from a named neighbour: SpecExec paper") for table in tables)
    assert "No stored copy of this repo's own pages was found" in raw["qwen3-32b-awq"]["target"]["checked"]


def test_big_pairs_draft_small_and_offer_the_16bit_original() -> None:
    """Each big pair's own draft is small: a published 4-bit checkpoint with the 16-bit original as an option,
    or a draft small enough in 16 bits (Qwen3 0.6B, 1.5 GB) to need no 4-bit copy; what was checked is written
    down; every acceptance table names the draft it was measured with."""
    raw = {entry["id"]: entry for entry in json.loads(catalog_path().read_text())["pairs"]}
    for pair in load_catalog().pairs:
        for option in pair.drafts:
            assert option.acceptance is None or option.acceptance.draft == option.model.repo, (pair.id, option.id)
        if pair.id == BUILTIN_PAIR_ID:
            continue
        assert raw[pair.id]["draft"]["checked"].startswith("Stored copies")
        if pair.draft.weights.bits is None:
            assert pair.draft_id == "16bit" and pair.draft.approx_bytes < 2e9 and not pair.draft_options
            continue
        assert pair.draft_id == "4bit" and pair.draft.weights.bits == 4 and pair.draft.approx_bytes < 6e9
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


# (where in the first big pair, value, words the refusal says): each failed far from the catalog before (an
# OverflowError, a ZeroDivisionError in the sizes, a StopIteration in the recommendation) or passed unchecked
HOSTILE_ENTRIES = [
    (("target", "config", "num_attention_heads"), 0, "num_attention_heads"),
    (("target", "config", "hidden_size"), -4096, "hidden_size"),
    (("target", "config"), DELETE, "'config' is missing"),
    (("target", "quantized", "bits"), 0, "quantized.bits"),
    (("target", "approx_bytes"), 10**400, "approx_bytes"),
    (("context_length",), 1e400, "context_length"),
    (("min_ram_gb",), float("nan"), "min_ram_gb"),
    (("min_vram_gb",), -1, "min_vram_gb"),
    (("draft",), 7.5, "'float' object"),
    (("acceptance", "tokens_per_pass", "64"), 10**400, "int too large"),
    (("acceptance", "tokens_per_pass", "64"), float("nan"), "tokens per pass"),
    (("acceptance", "tokens_per_pass", "64"), 80.0, "tokens per pass"),  # more than 64 drafted tokens can give
]


@pytest.mark.parametrize(
    "where, value, words",
    HOSTILE_ENTRIES,
    ids=[  # the same on every xdist worker (DELETE's repr holds its address)
        f"{'.'.join(where)}={'deleted' if value is DELETE else repr(value)[:12]}" for where, value, _ in HOSTILE_ENTRIES
    ],
)
def test_an_entry_the_fit_cannot_use_is_refused_as_the_catalog_is_read(tmp_path, where, value, words) -> None:
    data = json.loads(catalog_path().read_text())
    index = next(i for i, entry in enumerate(data["pairs"]) if entry["id"] == "llama3.3-70b-instruct-awq")
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(with_node(data, ("pairs", index, *where), value)))
    with pytest.raises(CatalogError, match="malformed pair entry") as refused:
        load_catalog(path)
    assert words in str(refused.value)


def test_a_catalog_without_the_built_in_pair_is_refused(tmp_path) -> None:
    """The built-in pair is what the wizard offers where nothing else fits (a StopIteration before)."""
    data = json.loads(catalog_path().read_text())
    data["pairs"] = [entry for entry in data["pairs"] if entry["id"] != BUILTIN_PAIR_ID]
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CatalogError, match="has no 'builtin' pair"):
        load_catalog(path)


def test_seeded_mutations_of_the_catalog_are_read_or_refused_in_words(tmp_path, capsys, monkeypatch) -> None:
    """300 damaged catalogs (SPECEXEC_CATALOG), each through `models recommend` and `models list --json` on a
    24 GB card: an answer or a plain refusal, never a traceback."""
    base = json.loads(catalog_path().read_text())
    path = tmp_path / "catalog.json"
    monkeypatch.setenv("SPECEXEC_CATALOG", str(path))
    monkeypatch.setenv("SPECEXEC_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("SPECEXEC_HW_FIXTURE", str(Path(__file__).parent / "fixtures" / "hw" / "gpu24-ram64-pcie4.json"))
    keys = ["quantized", "config", "acceptance", "draft_options", "retired", "context_length"]

    def mutate(node, chosen: random.Random):
        if isinstance(node, dict) and node and chosen.random() < 0.75:
            key = chosen.choice(list(node))
            return {**node, key: mutate(node[key], chosen)}
        if isinstance(node, list) and node and chosen.random() < 0.75:
            index = chosen.randrange(len(node))
            return [*node[:index], mutate(node[index], chosen), *node[index + 1 :]]
        return mutated_json(node, chosen, keys)

    answered = 0
    for seed in range(300):
        chosen = random.Random(seed)
        path.write_text(json.dumps(mutate(base, chosen)))
        for args in (("models", "recommend"), ("models", "list", "--json")):
            out = run_cli(capsys, *args)
            assert out.returncode in (0, 2), (seed, args, out.stderr)
            assert out.returncode == 0 or "model catalog" in out.stderr, (seed, args, out.stderr)
            answered += out.returncode == 0
    assert answered > 200  # mutations that leave a usable catalog are answered


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
        ("4bit", "TheBloke/Llama-2-7B-Chat-GPTQ"),
        ("16bit", "meta-llama/Llama-2-7b-chat-hf"),
    ]
    assert pairs["builtin"]["drafts"][0]["installed"] is True
    assert pairs["builtin"]["download_bytes"] == pairs["builtin"]["drafts"][0]["download_bytes"] == 0  # ships
    assert [d["installed"] for d in pairs["llama2-70b-chat-gptq"]["drafts"]] == [False, True]


def test_a_retired_pairs_downloads_stay_usable(tmp_path) -> None:
    """Folders downloaded for a pair that is no longer offered are still that pair's: `models delete <id>`
    finds them, and `models download <id>` still names its repos (a download in progress resumes)."""
    from core.models.download_jobs import wanted_repos
    from core.models.installed import pair_folders, resolve_name

    catalog = load_catalog()
    folders = pair_folders(catalog, "mixtral-8x7b-instruct-gptq")
    for folder in folders:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "config.json").write_text("{}")
    assert resolve_name(tmp_path, "mixtral-8x7b-instruct-gptq", catalog) == [tmp_path / folder for folder in folders]
    assert wanted_repos("mixtral-8x7b-instruct-gptq", None, catalog)["target"] == (
        "TheBloke/Mixtral-8x7B-Instruct-v0.1-GPTQ",
        "main",
    )
