"""The hardware probe on this machine (no NVIDIA driver, no CUDA), NVML parsing, copy-rate estimates, the
fixture files, and the `specexec hw` / `specexec models recommend` JSON contracts."""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import run_cli
from json_mutation import mutated_json, with_node
from core.errors import HardwareDescriptionError
from core.hardware.description import GpuInfo, HardwareDescription, PcieLink, load_description
from core.hardware.link import h2d_rate
from core.hardware.nvidia import read_nvidia_gpus
from core.hardware.probe import describe_hardware, probe_hardware

FIXTURES = Path(__file__).parent / "fixtures" / "hw"
HW_KEYS = {"cpu", "ram", "gpus", "gpu_note", "platform", "disk"}
GPU_KEYS = {
    "index",
    "name",
    "vram_total_bytes",
    "vram_free_bytes",
    "driver_version",
    "cuda_version",
    "compute_capability",
    "pcie",
    "h2d_bytes_per_second",
}
PAIR_KEYS = {
    "id",
    "name",
    "summary",
    "fit",
    "reason",
    "resident_layers",
    "total_layers",
    "pass_seconds",
    "budget",
    "tokens_per_pass",
    "acceptance_source",
    "tokens_per_second",
    "download_bytes",
    "disk_ok",
    "licence",
    "licence_url",
    "gated",
    "context_length",
}


def _has_nvidia() -> bool:
    return Path("/proc/driver/nvidia").exists()


@pytest.mark.skipif(_has_nvidia(), reason="this machine has an NVIDIA driver")
def test_probe_without_nvml_or_cuda_reports_plainly(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SPECEXEC_MODELS_DIR", str(tmp_path / "not" / "yet" / "made"))
    hw = probe_hardware(measure=True)  # --measure on a machine without a GPU: nothing to time, no error
    assert hw.gpus == ()
    assert hw.gpu_note.startswith("No NVIDIA GPU found") and "models run on the processor, slowly" in hw.gpu_note
    assert hw.ram.total_bytes >= hw.ram.available_bytes > 0
    assert hw.cpu.logical_cores >= 1 and hw.cpu.model
    assert hw.disk.path == str(tmp_path / "not" / "yet" / "made") and hw.disk.free_bytes > 0
    assert not (tmp_path / "not").exists()  # measuring free space creates nothing


@pytest.mark.gpu
def test_probe_on_a_cuda_machine_reads_nvml_and_measures_the_link() -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    hw = probe_hardware(measure=True)
    assert len(hw.gpus) >= 1 and hw.gpu_note.startswith(f"{len(hw.gpus)} NVIDIA GPU")
    gpu = hw.gpus[0]
    assert gpu.vram_total_bytes >= gpu.vram_free_bytes > 0 and gpu.compute_capability
    assert gpu.pcie.gen_max and gpu.pcie.width_max
    assert gpu.h2d_bytes_per_second > 1e9  # any PCIe link moves more than 1 GB/s pinned


def stand_in_winreg(values: dict[tuple[str, str], object]):
    """Windows' registry module, which only Windows has: OpenKey and QueryValueEx over `values`."""
    import contextlib
    import types

    module = types.ModuleType("winreg")
    module.HKEY_LOCAL_MACHINE = "HKLM"

    @contextlib.contextmanager
    def open_key(root, path):
        if not any(key == path for key, _ in values):
            raise FileNotFoundError(2, "The system cannot find the file specified")
        yield path

    def query_value(key, name):
        if (key, name) not in values:
            raise FileNotFoundError(2, "The system cannot find the file specified")
        return values[(key, name)], 1  # REG_SZ

    module.OpenKey, module.QueryValueEx = open_key, query_value
    return module


@pytest.mark.parametrize(
    ("registry", "shown"),
    [
        ("Intel(R) Core(TM) i7-8700K CPU @ 3.70GHz          ", "Intel(R) Core(TM) i7-8700K CPU @ 3.70GHz"),
        ("AMD Ryzen 9 7950X3D 16-Core Processor", "AMD Ryzen 9 7950X3D 16-Core Processor"),
        (None, "Intel64 Family 6 Model 158 Stepping 10, GenuineIntel"),  # no such value: Python's words
        ("   ", "Intel64 Family 6 Model 158 Stepping 10, GenuineIntel"),
    ],
)
def test_windows_names_the_processor_as_task_manager_does(monkeypatch, registry, shown) -> None:
    """platform.processor() on Windows is "Intel64 Family 6 Model 158 Stepping 10, GenuineIntel", which the
    wizard's first line showed; the name people know is in the registry."""
    import sys

    from core.hardware import probe

    values = {} if registry is None else {(probe.WINDOWS_PROCESSOR_KEY, "ProcessorNameString"): registry}
    monkeypatch.setitem(sys.modules, "winreg", stand_in_winreg(values))
    monkeypatch.setattr(probe.platform, "system", lambda: "Windows")
    monkeypatch.setattr(probe.platform, "processor", lambda: "Intel64 Family 6 Model 158 Stepping 10, GenuineIntel")
    assert probe.cpu_model() == shown


def test_h2d_measure_needs_cuda() -> None:
    from core.hardware.h2d import measure_h2d

    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA present: measured in the GPU run")
    assert measure_h2d(0) is None


class FakeNVML:
    """Stands in for the pynvml module where no NVIDIA driver exists: the real calls' names and return types."""

    class NotSupported(Exception):
        pass

    def __init__(self, fail_init: bool = False) -> None:
        self.fail_init, self.shut = fail_init, False

    def nvmlInit(self):
        if self.fail_init:
            raise self.NotSupported("NVML Shared Library Not Found")

    def nvmlShutdown(self):
        self.shut = True

    def nvmlSystemGetDriverVersion(self):
        return "560.35.03"

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return 12060

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("handle", index)

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA GeForce RTX 3060"

    def nvmlDeviceGetMemoryInfo(self, handle):
        return type("Memory", (), {"total": 12 * 1024**3, "free": 11 * 1024**3})()

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return (8, 6)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        raise self.NotSupported("Not Supported")

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle):
        return 3

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):
        return 8

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle):
        return 16


def test_nvml_fields_are_parsed_and_unsupported_ones_are_none() -> None:
    nvml = FakeNVML()
    gpus, missing = read_nvidia_gpus(nvml)
    assert missing is None and nvml.shut
    assert gpus == [
        GpuInfo(
            0,
            "NVIDIA GeForce RTX 3060",
            12 * 1024**3,
            11 * 1024**3,
            "560.35.03",
            "12.6",
            "8.6",
            PcieLink(None, 3, 8, 16),
        )
    ]
    assert read_nvidia_gpus(FakeNVML(fail_init=True)) == ([], "no NVIDIA driver was found")


def test_copy_rate_is_measured_or_an_estimate_from_the_link() -> None:
    gpu = GpuInfo(0, "g", 1, 1, pcie=PcieLink(1, 4, 16, 16))  # idle: Gen1 now, Gen4 at most
    assert h2d_rate(gpu)[0] == 25e9 and "estimate for PCIe Gen4 x16" in h2d_rate(gpu)[1]
    assert h2d_rate(GpuInfo(0, "g", 1, 1, pcie=PcieLink(3, 3, 8, 8)))[0] == 6e9
    rate, words = h2d_rate(GpuInfo(0, "g", 1, 1))
    assert rate == 12e9 and "unknown" in words
    measured = GpuInfo(0, "g", 1, 1, pcie=PcieLink(4, 4, 16, 16), h2d_bytes_per_second=21.3e9)
    assert h2d_rate(measured) == (21.3e9, "measured pinned copy: 21.3 GB/s")


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.stem)
def test_fixtures_follow_the_contract_and_round_trip(path: Path) -> None:
    data = json.loads(path.read_text())
    assert HW_KEYS <= set(data) and all(GPU_KEYS <= set(gpu) for gpu in data["gpus"])
    hw = load_description(path)
    assert HardwareDescription.from_dict(hw.to_dict(), hw.source) == hw


def test_fixture_env_wins_and_bad_fixtures_are_named(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SPECEXEC_HW_FIXTURE", str(FIXTURES / "gpu12-ram32-pcie4.json"))
    assert describe_hardware().gpus[0].name == "NVIDIA GeForce RTX 3060"
    assert describe_hardware(str(FIXTURES / "cpu-only-ram16.json")).gpus == ()  # --hw beats the variable
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"cpu": {"model": "x"}}))
    with pytest.raises(HardwareDescriptionError, match="malformed"):
        load_description(broken)
    with pytest.raises(HardwareDescriptionError, match="does not exist"):
        load_description(tmp_path / "absent.json")


# (where, value) a fixture file could hold, each refused naming the field
HOSTILE_FIELDS = [
    (("gpus", 0, "vram_free_bytes"), "lots"),
    (("gpus", 0, "vram_total_bytes"), -1),
    (("gpus", 0, "vram_total_bytes"), 10**400),
    (("gpus", 0, "vram_free_bytes"), 24.5e9),
    (("gpus", 0, "index"), True),
    (("gpus", 0, "name"), None),
    (("gpus", 0, "compute_capability"), 8.9),
    (("gpus", 0, "h2d_bytes_per_second"), 1e400),
    (("gpus", 0, "h2d_bytes_per_second"), 0),
    (("gpus", 0, "draft_kernel_bytes_per_second"), {"fused": "fast"}),
    (("gpus", 0, "draft_kernel_bytes_per_second"), [1e11]),
    (("gpus", 0, "pcie"), {"gen_max": [4]}),
    (("gpus", 0, "pcie"), {"lanes": 16}),
    (("gpus", 0), "RTX 4090"),
    (("gpus",), {"0": {}}),
    (("cpu", "physical_cores"), "8"),
    (("ram", "total_bytes"), 2**64),
    (("ram", "available_bytes"), None),
    (("disk", "free_bytes"), float("nan")),
    (("disk",), []),
    (("platform",), {"system": 11}),
    (("gpu_note",), ["one GPU"]),
]


@pytest.mark.parametrize("where, value", HOSTILE_FIELDS, ids=lambda v: repr(v)[:30])
def test_a_fixture_field_of_the_wrong_type_or_range_is_refused_by_name(tmp_path, where, value) -> None:
    """Every field is checked as the file is read: each of these failed or misled the fit far from the file
    (a TypeError in the link rate, an OverflowError in the sizes, a negative card chosen) before."""
    data = json.loads((FIXTURES / "gpu24-ram64-pcie4.json").read_text())
    path = tmp_path / "hw.json"
    path.write_text(json.dumps(with_node(data, where, value)))
    with pytest.raises(HardwareDescriptionError, match="malformed") as refused:
        load_description(path)
    named = ".".join(str(step) for step in where if not isinstance(step, int))
    assert named.split(".")[-1] in str(refused.value) and len(str(refused.value)) < 300


def test_seeded_mutations_of_the_fixtures_are_read_or_refused_in_words(tmp_path, capsys) -> None:
    """300 damaged fixture files, each through `hw`, `hw --json` and `models recommend`: an answer or a
    plain refusal, never a traceback."""
    fixtures = [json.loads(path.read_text()) for path in sorted(FIXTURES.glob("*.json"))]
    keys = ["h2d_bytes_per_second", "draft_kernel_bytes_per_second", "fused_matmul_bytes_per_second", "pcie"]
    path, answered = tmp_path / "hw.json", 0
    for seed in range(300):
        chosen = random.Random(seed)
        data = chosen.choice(fixtures)
        for _ in range(chosen.randint(1, 3)):
            data = mutated_json(data, chosen, keys)
        path.write_text(json.dumps(data))
        for args in (("hw",), ("hw", "--json"), ("models", "recommend")):
            out = run_cli(capsys, *args, "--hw", str(path))
            assert out.returncode in (0, 2), (seed, args, out.stderr)
            assert out.returncode == 0 or "hardware description" in out.stderr, (seed, args, out.stderr)
            answered += out.returncode == 0
    assert answered > 150  # mutations that leave a readable file are answered


@pytest.fixture
def cli(capsys, monkeypatch) -> Callable[..., subprocess.CompletedProcess]:
    """`specexec ARGS` in this process, with `env` added to the environment for that one call."""

    def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        with monkeypatch.context() as scoped:
            for name, value in (env or {}).items():
                scoped.setenv(name, value)
            return run_cli(capsys, *args)

    return run


def test_hw_cli_json_contract_and_text(tmp_path, cli) -> None:
    out = cli("hw", "--json", env={"SPECEXEC_MODELS_DIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert HW_KEYS <= set(data) and data["disk"]["path"] == str(tmp_path)
    text = cli("hw", "--hw", str(FIXTURES / "gpu24-ram64-pcie3.json"))
    assert text.returncode == 0 and "NVIDIA GeForce RTX 3090" in text.stdout and "PCIe Gen3 x16" in text.stdout
    bad = cli("hw", "--hw", str(tmp_path / "absent.json"))
    assert bad.returncode == 2 and "does not exist" in bad.stderr and "Traceback" not in bad.stderr


def test_recommend_cli_json_contract_and_table(cli) -> None:
    out = cli("models", "recommend", "--json", env={"SPECEXEC_HW_FIXTURE": str(FIXTURES / "gpu24-ram64-pcie4.json")})
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (
        HW_KEYS <= set(data["hardware"])
        and data["recommended"] == data["pairs"][0]["id"] == "llama3.3-70b-instruct-awq"
    )
    assert all(PAIR_KEYS <= set(pair) for pair in data["pairs"])
    assert {pair["fit"] for pair in data["pairs"]} <= {"fits", "tight", "no"}
    table = cli("models", "recommend", "--hw", str(FIXTURES / "cpu-only-ram16.json"), "--budget", "64")
    assert table.returncode == 0 and "Recommended: SmolLM2 135M (built-in)" in table.stdout
    assert "needs an NVIDIA GPU" in table.stdout
    assert cli("models", "recommend", "--budget", "0").returncode == 2


def test_torch_build_is_read_without_starting_cuda() -> None:
    import torch

    from core.hardware.torch_build import read_torch_build

    build = read_torch_build()
    assert build.torch_version == torch.__version__ and build.cuda_version == torch.version.cuda
    if build.cuda_version is None:
        assert build.arch_list == ()
    assert not torch.cuda.is_initialized()


@pytest.mark.parametrize(
    ("archs", "capability", "runs"),
    [
        (("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"), (8, 9), True),  # Ada runs sm_86 code
        (("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"), (12, 1), True),
        (("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"), (6, 1), False),  # Pascal
        (("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"), (7, 0), False),  # Volta: no sm_70 code
        (("sm_80", "sm_90a"), (9, 0), False),  # arch-specific code runs on one GPU only: not counted
        (("sm_80", "compute_80"), (9, 0), True),  # PTX is compiled by the driver for newer GPUs
        ((), (8, 6), False),
    ],
)
def test_build_architectures_against_a_compute_capability(archs, capability, runs) -> None:
    from core.hardware.torch_build import runs_on

    assert runs_on(archs, capability) is runs


def test_arch_names_parse_and_the_oldest_is_found() -> None:
    from core.hardware.torch_build import lowest_capability, parse_arch

    assert parse_arch("sm_120") == ("sm", 12, 0) and parse_arch("compute_75") == ("compute", 7, 5)
    assert parse_arch("sm_90a") is None and parse_arch("gfx90a") is None
    assert lowest_capability(["sm_120", "sm_75", "sm_86"]) == (7, 5) and lowest_capability([]) is None
