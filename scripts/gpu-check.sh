#!/usr/bin/env bash
# The prepared GPU check (docs/gpu-check.md): the questions of issue 37 settled in one call on a lent GPU, in
# at most 8 minutes. Each part runs in its own process under its own time limit and writes one JSON file; a
# last step merges them into report.json and summary.md.
#
#   scripts/gpu-check.sh [--cpu] [--out DIR] [--only PART,PART...]
#
# --cpu: the same parts on the CPU with tiny shapes, one after another in one process (a smoke test:
# tests/test_gpu_check.py; the GPU run gives each part its own process and limit). --out: where the
# report goes (default: $OUT when set, as on the lent machine, else ./gpu-check-report). --only: run just
# these parts (a rerun of those a first run lost; the report merges whatever is in DIR/parts). A part killed
# at its limit still writes what it found so far ("partial"); its log holds timed progress lines. The interpreter is
# $PYTHON, else /opt/torch/.venv/bin/python3 where it exists (the lent machine), else python3. Nothing is
# installed from the network: wheels in .whl/ (docs/gpu-check.md: none is needed today) go to a folder in /tmp,
# and the repository is put on PYTHONPATH, not installed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DEVICE=cuda
SMALL=()
OUTDIR=${OUT:-$ROOT/gpu-check-report}
ONLY=""
while [ $# -gt 0 ]; do
    case "$1" in
        --cpu) DEVICE=cpu; SMALL=(--small) ;;
        --out) OUTDIR=$2; shift ;;
        --only) ONLY=",$2,"; shift ;;
        *) echo "gpu-check.sh: unknown argument '$1' (use --cpu, --out DIR, --only PART,...)" >&2; exit 2 ;;
    esac
    shift
done

if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x /opt/torch/.venv/bin/python3 ]; then PY=/opt/torch/.venv/bin/python3
else PY=python3; fi

SITE=""
if compgen -G ".whl/*.whl" >/dev/null; then
    SITE=$(mktemp -d /tmp/specexec-gpu-check-site.XXXXXX)
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .whl/*.whl \
        || echo "gpu-check.sh: installing the carried wheels failed; parts that need them will say so" >&2
fi
export PYTHONPATH="$ROOT${SITE:+:$SITE}${PYTHONPATH:+:$PYTHONPATH}"
# caches of this run (the autotuner's cost models, the converted model) stay out of the user's folders
export SPECEXEC_CACHE_DIR=${SPECEXEC_CACHE_DIR:-$(mktemp -d /tmp/specexec-gpu-check-cache.XXXXXX)}
export SPECEXEC_DATA_DIR=${SPECEXEC_DATA_DIR:-$(mktemp -d /tmp/specexec-gpu-check-data.XXXXXX)}

PARTS="$OUTDIR/parts"
mkdir -p "$PARTS"
[ -z "$ONLY" ] && rm -f "$PARTS"/*.json
START=$(date +%s)
TOTAL=${GPU_CHECK_SECONDS:-470}  # seconds for all parts: the report is written within 8 minutes
SCALE=1
if [ "$DEVICE" = cpu ]; then  # a smoke run on a shared CPU: tiny shapes, but Python's imports alone take seconds
    SCALE=${GPU_CHECK_CPU_SCALE:-6}
    TOTAL=$((TOTAL * SCALE))
fi

# run NAME LIMIT COMMAND...: the command under `timeout`, at most LIMIT seconds and what is left of TOTAL
wanted() { [ -z "$ONLY" ] || [[ "$ONLY" == *",$1,"* ]]; }  # wanted NAME: not left out by --only

run() {
    local name=$1 limit=$(($2 * SCALE))
    shift 2
    rm -f "$PARTS/$name.json"
    local left=$((TOTAL - ($(date +%s) - START)))
    [ "$limit" -gt "$left" ] && limit=$left
    if [ "$limit" -lt 5 ]; then
        echo "gpu-check: $name skipped (the 8 minutes are spent)" >&2
        return
    fi
    echo "gpu-check: $name (at most ${limit} s)" >&2
    timeout -k 5 "$limit" "$@" 2>"$PARTS/$name.log"
    local rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        echo "gpu-check: $name killed at its limit" >&2
    elif [ $rc -ne 0 ]; then
        echo "gpu-check: $name failed (exit $rc; $PARTS/$name.log)" >&2
    fi
}

PLAN=()  # --cpu: the parts to run one after another in one process (each part's own process on the GPU)
PLAN_LIMIT=0
part() {  # part NAME LIMIT PART [ENV=VALUE...]
    local name=$1 limit=$2 module=$3
    shift 3
    wanted "$name" || return 0
    if [ "$DEVICE" = cpu ]; then
        rm -f "$PARTS/$name.json"
        local assignments
        assignments=$(IFS=,; echo "$*")
        PLAN+=("$name=$module${assignments:+:$assignments}")
        PLAN_LIMIT=$((PLAN_LIMIT + limit))
        return
    fi
    run "$name" "$limit" env "$@" "$PY" -m core.bench.gpu_check "$module" --device "$DEVICE" "${SMALL[@]}" \
        --out "$PARTS/$name.json"
}

part versions 25 versions
part profile 60 profile
part token-speed-fix-on 55 token-speed SPECEXEC_ATTENTION_FIX=1 SPECEXEC_CUDA_GRAPHS=0
part passes-eager 55 passes SPECEXEC_CUDA_GRAPHS=0
part passes-graphs 40 passes SPECEXEC_CUDA_GRAPHS=1
part step-graphs 35 step-graphs
if wanted matmul && [ "$DEVICE" = cuda ]; then
    run matmul 75 sh -c "\"$PY\" -m core.cli.main bench matmul --device cuda --rows 1,16,32,64 --repeats 20 --json > \"$PARTS/matmul.json\""
elif wanted matmul; then  # a check that it runs: one tiny linear
    run matmul 60 sh -c "\"$PY\" -m core.cli.main bench matmul --device cpu --smoke --rows 1,16 --repeats 1 --json > \"$PARTS/matmul.json\""
fi
part pinning 20 pinning
part offload 45 offload
part shadow 60 shadow
part agreement 50 agreement
part graph-vram 25 graph-vram
part gemlite 60 gemlite  # needs gemlite's wheel in .whl/ (docs/gpu-check.md); without it, says so
part token-speed-fix-off 90 token-speed SPECEXEC_ATTENTION_FIX=0  # last: the "before", measured once already
if [ ${#PLAN[@]} -gt 0 ]; then  # --cpu: torch imported once for every part, not a dozen times
    run parts "$PLAN_LIMIT" "$PY" -m core.bench.gpu_check sequence "${PLAN[@]}" --device cpu --small --parts "$PARTS"
fi

"$PY" -m core.bench.gpu_check report --parts "$PARTS" --out "$OUTDIR"
echo "gpu-check: report in $OUTDIR/report.json, summary in $OUTDIR/summary.md ($(($(date +%s) - START)) s)" >&2
cat "$OUTDIR/summary.md"
