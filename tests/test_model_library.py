"""The models folder without the network: token storage, `models list`, `delete` and `import`."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import stat
import sys
import struct
from pathlib import Path

import pytest

from conftest import without_read_override
from core.cli.main import main
from core.errors import ModelFormatError
from core.models.importing import import_model
from core.models.token_store import current_token, stored_token, token_file

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Models and config folders in tmp_path; no keyring backend and no token from the real environment."""
    monkeypatch.setenv("SPECEXEC_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("SPECEXEC_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return tmp_path


def safetensors_bytes(size: int = 1000) -> bytes:
    """A whole safetensors file: its header, then `size` bytes of one uint8 tensor."""
    header = json.dumps({"model.norm.weight": {"dtype": "U8", "shape": [size], "data_offsets": [0, size]}}).encode()
    return struct.pack("<Q", len(header)) + header + b"\0" * size


def hf_folder(path: Path, weights: bool = True, config: str = '{"model_type": "llama"}') -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(config)
    if weights:
        (path / "model.safetensors").write_bytes(safetensors_bytes())
    return path


def gguf_file(path: Path, version: int = 3, tensors: int = 2) -> Path:
    """A GGUF header (general.architecture "llama", no other metadata) listing `tensors` tensors of 4 values,
    then a little padding for their data."""
    key, value = b"general.architecture", b"llama"
    metadata = struct.pack("<Q", len(key)) + key + struct.pack("<IQ", 8, len(value)) + value
    infos = b"".join(struct.pack("<Q", 2) + b"t%d" % i + struct.pack("<IQIQ", 1, 4, 0, 0) for i in range(tensors))
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", version, tensors, 1) + metadata + infos + b"\0" * 32)
    return path


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def list_json(capsys) -> dict:
    capsys.readouterr()
    assert main(["models", "list", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_login_without_keyring_writes_a_file_only_the_user_can_read(home, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("hf_secret\n"))  # piped, as in `echo $T | specexec models login`
    assert main(["models", "login"]) == 0
    path = token_file()
    assert path.read_text().strip() == "hf_secret" and str(path) in capsys.readouterr().out
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stored_token() == current_token() == "hf_secret"
    monkeypatch.setenv("HF_TOKEN", "hf_from_env")
    assert current_token() == "hf_from_env"  # the environment wins over the stored token
    assert main(["models", "logout"]) == 0 and "forgotten" in capsys.readouterr().out
    assert not path.exists() and stored_token() is None
    assert main(["models", "login", "--token", "  "]) == 2 and "empty" in capsys.readouterr().err


def test_import_folder_copy_and_link_then_list_and_delete(home, tmp_path, capsys):
    source = hf_folder(tmp_path / "src" / "my-model")
    assert main(["models", "import", str(source)]) == 0
    copied = home / "models" / "my-model"
    assert (copied / "model.safetensors").read_bytes() == safetensors_bytes() and not copied.is_symlink()
    assert "--target" in capsys.readouterr().out

    kept = hf_folder(tmp_path / "elsewhere" / "linked-model")
    assert main(["models", "import", str(kept), "--link"]) == 0
    assert (home / "models" / "linked-model").resolve() == kept.resolve()
    capsys.readouterr()

    models = {model["name"]: model for model in list_json(capsys)["models"]}
    assert set(models) == {"my-model", "linked-model"}
    assert models["my-model"]["complete"] and models["my-model"]["done_bytes"] > 1000
    assert models["linked-model"]["linked"] and not models["my-model"]["linked"]

    assert main(["models", "delete", "linked-model", "--yes"]) == 0
    assert kept.is_dir() and (kept / "model.safetensors").exists()  # only the link went
    assert main(["models", "delete", "my-model", "--yes"]) == 0
    assert not copied.exists() and list_json(capsys)["models"] == []
    assert main(["models", "delete", "my-model", "--yes"]) == 2
    assert "no model 'my-model'" in capsys.readouterr().err


def test_the_command_line_looks_in_the_models_folder_picked_in_the_app(tmp_path, monkeypatch, capsys):
    """`specexec models list` (and every default --dir) looks where the app does: the folder picked in its
    Settings, read from its settings file; SPECEXEC_MODELS_DIR still wins; a settings file holding something
    no Settings page saves leaves the default."""
    from core.system.locations import models_dir

    monkeypatch.delenv("SPECEXEC_MODELS_DIR", raising=False)
    monkeypatch.setenv("SPECEXEC_DATA_DIR", str(tmp_path / "data"))
    settings = tmp_path / "data" / "config" / "settings.json"
    settings.parent.mkdir(parents=True)
    picked = tmp_path / "second-drive" / "models"
    hf_folder(picked / "my-model")
    settings.write_text(json.dumps({"schema_version": 3, "models_folder": str(picked)}))
    assert models_dir() == picked
    assert [model["name"] for model in list_json(capsys)["models"]] == ["my-model"]
    for damaged in ("models", ["x"], "a\u0000b", ""):
        settings.write_text(json.dumps({"models_folder": damaged}))
        assert models_dir() == tmp_path / "data" / "models", damaged
    settings.write_text("{not json")
    assert models_dir() == tmp_path / "data" / "models"
    settings.write_text(json.dumps({"models_folder": str(picked)}))
    monkeypatch.setenv("SPECEXEC_MODELS_DIR", str(tmp_path / "outside"))
    assert models_dir() == tmp_path / "outside"


def test_a_models_folder_at_a_drives_root_lists_its_models_past_the_folders_the_system_keeps(tmp_path):
    """A drive's root holds a `lost+found` (Linux) or `System Volume Information` (Windows) that refuses even a
    look inside; with the models folder there ("Keep models on another drive…"), `models list` and the app's
    Models page ended in a PermissionError."""
    drive = tmp_path / "drive"
    (drive / "org--tiny").mkdir(parents=True)
    (drive / "org--tiny" / "config.json").write_text('{"model_type": "llama"}', encoding="utf-8")
    (drive / "lost+found").mkdir(mode=0)
    try:
        result = subprocess.run(
            [*without_read_override(), sys.executable, "-m", "core.cli.main", "models", "list", "--json"],
            env={**os.environ, "SPECEXEC_MODELS_DIR": str(drive)},
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        (drive / "lost+found").chmod(0o700)
    assert result.returncode == 0, result.stderr
    assert [model["name"] for model in json.loads(result.stdout)["models"]] == ["org--tiny"]


def test_a_model_folder_that_cannot_be_read_is_said_so_in_the_settings_words(tmp_path):
    """Settings' model field asks `spec_problem` about what is typed or browsed to; a folder this account may
    not look inside raised a PermissionError out of the field's check."""
    folder = tmp_path / "someone-elses-model"
    folder.mkdir(mode=0)
    code = f"from core.models.model_spec import spec_problem; print(spec_problem({str(folder)!r}))"
    try:
        result = subprocess.run(
            [*without_read_override(), sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
    finally:
        folder.chmod(0o700)
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout.strip() == f"the folder {folder} cannot be read: this account has no permission to look inside it"
    )


def test_delete_refuses_without_a_terminal_unless_yes(home, monkeypatch, capsys):
    hf_folder(home / "models" / "some-model")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal: nobody to ask
    assert main(["models", "delete", "some-model"]) == 2
    assert "--yes" in capsys.readouterr().err and (home / "models" / "some-model").is_dir()


def test_a_model_on_a_read_only_drive_is_not_deleted_and_the_words_say_why(small_disk, capsys):
    """A drive the system stopped writing to (or a write-protected one) made `models delete` a traceback."""
    folder = hf_folder(small_disk / "models" / "my-model")
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    assert main(["models", "delete", "my-model", "--yes", "--dir", str(small_disk / "models")]) == 2
    error = capsys.readouterr().err
    assert f"error: {folder} could not be deleted: its drive is read-only" in error, error
    assert "Make the drive writable, then delete it again. Nothing was deleted." in error
    assert (folder / "model.safetensors").exists() and (folder / "config.json").exists()


def _listed_before(folder: Path, name: str) -> list[str]:
    """The entries `os.scandir` (and so shutil.rmtree) meets in `folder` before `name`."""
    names = [entry.name for entry in os.scandir(folder)]
    return names[: names.index(name)]


def test_a_delete_stopped_half_way_says_the_model_is_no_longer_whole(small_disk, capsys):
    """rmtree stops at the first file it cannot remove, after removing the ones it met before: the words say
    the model is no longer whole (here its weights sit on a read-only drive mounted inside the folder)."""
    folder = small_disk / "models" / "my-model"
    for weights_first in (True, False):  # the order this filesystem lists them in decides what goes first
        folder.mkdir(parents=True)
        if weights_first:
            (folder / "weights").mkdir()
        hf_folder(folder / "files", weights=False)
        (folder / "tokenizer.json").write_text("{}")
        (folder / "weights").mkdir(exist_ok=True)
        if _listed_before(folder, "weights"):
            break
        shutil.rmtree(folder)
    else:
        pytest.skip("this filesystem lists a new folder before the files beside it, whatever the order")
    met_first = _listed_before(folder, "weights")
    weights = folder / "weights"
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(weights)], check=True)
    try:
        (weights / "model.safetensors").write_bytes(safetensors_bytes())
        subprocess.run(["mount", "-o", "remount,ro", str(weights)], check=True)
        assert main(["models", "delete", "my-model", "--yes", "--dir", str(small_disk / "models")]) == 2
        error = capsys.readouterr().err
        assert f"{folder} could not be deleted: its drive is read-only" in error, error
        assert "Some of its files were deleted before that, so it cannot be used until it is downloaded" in error
        assert not any((folder / name).exists() for name in met_first)
        assert (weights / "model.safetensors").exists()
    finally:
        subprocess.run(["umount", "-l", str(weights)], check=True)


def test_delete_refuses_a_folder_another_process_is_downloading_into(home, capsys):
    import subprocess
    import sys

    folder = hf_folder(home / "models" / "busy-model")
    holder = subprocess.Popen(  # a real second process holding the folder's download lock, as a download does
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from core.models.folder_lock import FolderLock;"
            f"lock = FolderLock(Path({str(folder)!r})); lock.acquire(); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[1],
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(["models", "delete", "busy-model", "--yes"]) == 75
        error = capsys.readouterr().err
        assert f"not deleted: {folder} is downloading in another process (pid {holder.pid})" in error
        assert (folder / "model.safetensors").exists()  # nothing was removed
    finally:
        holder.kill()
        holder.wait()
    assert main(["models", "delete", "busy-model", "--yes"]) == 0  # the dead holder's lock is taken over
    assert not folder.exists() and not any(p.name.endswith(".download-lock") for p in (home / "models").iterdir())


def test_import_gguf_into_a_folder_the_loader_accepts(home, tmp_path, capsys):
    from core.loading.load import _folder_or_gguf

    source = gguf_file(tmp_path / "tiny.Q4_0.gguf")
    destination = import_model(source, home / "models")
    assert destination == home / "models" / "tiny.Q4_0"
    assert _folder_or_gguf(destination, "tiny") == ("gguf", (destination / source.name).resolve(), "tiny")
    linked = import_model(gguf_file(tmp_path / "other.gguf"), home / "models", link=True)
    assert (linked / "other.gguf").is_symlink()
    assert {model["name"] for model in list_json(capsys)["models"]} == {"tiny.Q4_0", "other"}


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda tmp: tmp / "absent", "does not exist"),
        (lambda tmp: hf_folder(tmp / "no-weights", weights=False), "no weights"),
        (lambda tmp: hf_folder(tmp / "gpt2", config='{"model_type": "gpt2"}'), "cannot run models of type 'gpt2'"),
        (lambda tmp: hf_folder(tmp / "listed", config="[1, 2]"), "does not say what kind of model it is"),
        (lambda tmp: hf_folder(tmp / "no-type", config='{"hidden_size": 8}'), "does not say what kind of model it is"),
        (lambda tmp: (tmp / "empty").mkdir() or tmp / "empty", "no config.json"),
        (lambda tmp: write(tmp / "x.gguf", b"GGML" + b"\0" * 40), "not a GGUF file"),
        (lambda tmp: gguf_file(tmp / "v9.gguf", version=9), "version 9"),
        (lambda tmp: write(tmp / "short.gguf", b"GGUF"), "cut short inside its header"),
        (lambda tmp: write(tmp / "notes.txt", b"hi"), "neither a model folder"),
    ],
)
def test_import_refuses_what_is_not_a_model_with_a_clear_error(home, tmp_path, capsys, make, message):
    source = make(tmp_path)
    assert main(["models", "import", str(source)]) == 2
    assert message in capsys.readouterr().err
    assert not (home / "models").exists() or not any((home / "models").iterdir())


def test_import_refuses_to_overwrite(home, tmp_path):
    source = hf_folder(tmp_path / "m")
    import_model(source, home / "models")
    with pytest.raises(ModelFormatError, match="already exists"):
        import_model(source, home / "models")


def test_an_import_the_drive_cannot_take_is_refused_before_the_copy(home, tmp_path, capsys, small_disk):
    """Importing onto a drive without room for the copy (and some to spare) copied until the drive was full and
    then showed the OS's "[Errno 28]"; now refused first, in words with the sizes, and nothing is left."""
    source = hf_folder(tmp_path / "big")
    (source / "model-2.safetensors").write_bytes(safetensors_bytes(3 << 20))
    assert main(["models", "import", str(source), "--dir", str(small_disk / "models")]) == 2
    said = capsys.readouterr().err
    assert f"error: big takes 3.0 MB and the drive holding {small_disk / 'models'} has" in said, said
    assert "Free some space, or choose a models folder on another drive" in said
    assert list((small_disk / "models").iterdir()) == []


def test_a_drive_that_fills_during_an_import_stops_the_copy_and_leaves_nothing(home, tmp_path, small_disk, monkeypatch):
    """The drive fills after the check (another program wrote meanwhile: the check is made to see room):
    shutil.copytree noted the failure and went on copying every other file; now the first failure stops the
    copy, the half-copied folder is removed and the error names the drive."""
    from core.errors import DiskWriteError
    from core.models import importing

    monkeypatch.setattr(importing, "free_bytes", lambda _root: 1 << 40)
    source = hf_folder(tmp_path / "m")
    for shard in range(3):
        (source / f"model-{shard}.safetensors").write_bytes(safetensors_bytes(1 << 20))
    copied: list[str] = []
    copy = importing._copy_or_stop
    monkeypatch.setattr(importing, "_copy_or_stop", lambda a, b: copied.append(a) or copy(a, b))
    with pytest.raises(DiskWriteError, match=f"m was not imported: the drive holding {small_disk} is full"):
        import_model(source, small_disk)
    assert len(copied) < 5 and list(small_disk.iterdir()) == []  # stopped at the shard that did not fit


def test_an_import_into_a_folder_that_cannot_be_made_is_said_in_words(home, tmp_path, capsys):
    (tmp_path / "taken").write_text("a file where the models folder should be")
    assert main(["models", "import", str(hf_folder(tmp_path / "m")), "--dir", str(tmp_path / "taken" / "models")]) == 2
    said = capsys.readouterr().err
    assert said.startswith(f"error: cannot import into {tmp_path / 'taken' / 'models'}") and "Traceback" not in said


def test_with_a_keyring_backend_the_token_goes_there_and_no_file_is_written(home, dict_keyring):
    """The OS keyrings cannot run on this headless machine; a dictionary backend stands in for one through
    keyring's own backend API, which is all token_store talks to."""
    from core.models.token_store import delete_token, save_token

    assert save_token("hf_in_keyring") == "the system keyring"
    assert not token_file().exists() and stored_token() == "hf_in_keyring"
    assert list(dict_keyring.values()) == ["hf_in_keyring"]
    assert delete_token() and dict_keyring == {} and stored_token() is None
