#!/usr/bin/env bash
# The GPU check (issue 27, section 5; CONTRIBUTING.md, "A real GPU"). On a machine with an NVIDIA GPU, from this
# source tree (PYTHONPATH=src: nothing installed, no network), it records the real outputs of nvidia-smi (the
# table, -q, -q -x, -L, --version, --query-gpu as CSV) and /proc/driver/nvidia/version, runs `tfgpu doctor --json`,
# compares every fact with them (PASS/FAIL lines), logs a small JAX and PyTorch GPU op and a deliberately failing
# one (out of memory), runs `tfgpu explain --json` on each log, and times the doctor against `python3 -c pass`.
#
#   bash scripts/gpu_check.sh [OUT_DIR]       (default: $OUT, else ./gpu-check-out)
#
# Writes two files to OUT_DIR: summary.txt (read it first) and gpu-check.tar.gz (every output, the summary too;
# `python3 scripts/gpu_check.py import` files them under tests/data/gpu/). Every step is cut at its own time limit
# and at the budget (a hung nvidia-smi costs its limit once, not the run). Without a GPU it says "no GPU here" and
# still exits 0 with what it could collect. Exit 1: a fact disagrees (FAIL); 2: OUT_DIR cannot be written.
#
# Knobs (environment): TFGPU_GPU_CHECK_PYTHON (python3), TFGPU_GPU_CHECK_BUDGET (seconds in all, 300),
# TFGPU_GPU_CHECK_SMI_TIMEOUT (per nvidia-smi call, 30), TFGPU_GPU_CHECK_OP_TIMEOUT (per JAX/PyTorch op, 120),
# TFGPU_GPU_CHECK_RUNS (timing rounds, 9), TFGPU_GPU_CHECK_PROC (the version file, /proc/driver/nvidia/version).
set -u
set -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
OUT_DIR=${1:-${OUT:-$PWD/gpu-check-out}}
PY=${TFGPU_GPU_CHECK_PYTHON:-python3}
BUDGET=${TFGPU_GPU_CHECK_BUDGET:-300}
SMI_LIMIT=${TFGPU_GPU_CHECK_SMI_TIMEOUT:-30}
OP_LIMIT=${TFGPU_GPU_CHECK_OP_TIMEOUT:-120}
RUNS=${TFGPU_GPU_CHECK_RUNS:-9}
PROC_VERSION=${TFGPU_GPU_CHECK_PROC:-/proc/driver/nvidia/version}
RESERVE=15                        # seconds kept for the summary and the archive
MAX_BYTES=$((4 * 1024 * 1024))    # one output at most (a runaway log is cut, and the manifest says so)
# the probe's own query (tfgpu.facts.probe.parsers.SMI_FIELDS) and the comparison's (scripts/gpu_check.py QUERY)
TFGPU_QUERY=index,name,uuid,driver_version,memory.total,pci.device_id,compute_cap
QUERY=index,name,uuid,driver_version,memory.total,compute_cap,pci.bus_id

for n in "$BUDGET" "$SMI_LIMIT" "$OP_LIMIT" "$RUNS"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "gpu_check.sh: not a whole number: $n" >&2; exit 2; }
done
if ! mkdir -p "$OUT_DIR" || [[ ! -w $OUT_DIR ]]; then
  echo "gpu_check.sh: cannot write to $OUT_DIR" >&2
  exit 2
fi
TMP=$(mktemp -d) || exit 2
trap 'rm -rf "$TMP"' EXIT
W=$TMP/gpu-check
mkdir -p "$W/stderr"
: > "$W/manifest.tsv"

export PYTHONPATH="$ROOT/src"               # tfgpu from this tree, not installed
export TFGPU_CACHE_DIR="$TMP/cache"         # a fresh knowledge-base cache; nothing written to the home directory
unset PYTHONDONTWRITEBYTECODE               # else every run recompiles every module (CONTRIBUTING, Performance)
START=$SECONDS

left() { echo $((BUDGET - (SECONDS - START))); }

record() {  # record STEP RC SECONDS FILE COMMAND...
  local step=$1 rc=$2 secs=$3 file=$4
  shift 4
  local cmd
  cmd=$(printf '%q ' "$@")
  cmd=${cmd//"$W"/DIR}      # the fixtures' origin without this run's temporary directory and checkout path
  cmd=${cmd//"$ROOT"/.}
  printf '%s\t%s\t%s\t%s\t%s\n' "$step" "$rc" "$secs" "$file" "${cmd% }" >> "$W/manifest.tsv"
}

# step STEP LIMIT MODE FILE COMMAND...: run COMMAND under `timeout`, at most LIMIT seconds and never past the
# budget; MODE out: stdout to FILE, stderr to stderr/STEP.txt; MODE log: both to FILE (as a user pastes a log).
step() {
  local step=$1 limit=$2 mode=$3 file=$4
  shift 4
  local avail=$(( $(left) - RESERVE ))
  if (( avail < 3 )); then
    record "$step" skipped 0 "$file" "$@"
    return 0
  fi
  (( limit > avail )) && limit=$avail
  local t0=$SECONDS rc
  if [[ $mode == log ]]; then
    timeout -k 5 "$limit" "$@" > "$W/$file" 2>&1 < /dev/null
    rc=$?
  else
    timeout -k 5 "$limit" "$@" > "$W/$file" 2> "$W/stderr/$step.txt" < /dev/null
    rc=$?
  fi
  if (( $(wc -c < "$W/$file") > MAX_BYTES )); then
    truncate -s "$MAX_BYTES" "$W/$file"
    rc="$rc(cut at $MAX_BYTES bytes)"
  fi
  record "$step" "$rc" $((SECONDS - t0)) "$file" "$@"
  LAST_RC=$rc
}

# ---------------------------------------------------------------------------------------------- the machine
{
  echo "date (UTC): $(date -u '+%Y-%m-%d %H:%M:%S')"
  echo "kernel: $(uname -srm)"
  echo "cpus: $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?')"
  echo "python: $(timeout 20 "$PY" -c 'import sys; print(sys.executable, sys.version.split()[0])' 2>&1 | head -c 300)"
  echo "distributions: $(timeout 30 "$PY" -c '
from importlib import metadata
out = []
for name in ("torch", "jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda13-plugin", "nvidia-ml-py", "typer", "rich",
             "packaging", "tensorflow"):
    try:
        out.append("%s %s" % (name, metadata.version(name)))
    except metadata.PackageNotFoundError:
        out.append("%s absent" % name)
print(", ".join(out))' 2>&1 | head -c 600)"
  echo "tree: $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo 'not a git checkout') ($ROOT)"
} > "$W/env.txt"

# ---------------------------------------------------------------------------------------------- nvidia-smi, /proc
smi() {  # smi STEP FILE ARGS...: one nvidia-smi call; after one that hung, the others are not tried
  local step=$1 file=$2
  shift 2
  if [[ $SMI_HUNG == 1 ]]; then
    record "$step" skipped-after-hang 0 "$file" "$SMI" "$@"
    return 0
  fi
  step "$step" "$SMI_LIMIT" out "$file" "$SMI" "$@"
  [[ $LAST_RC == 124 || $LAST_RC == 137 ]] && SMI_HUNG=1
  return 0
}
SMI_HUNG=0
LAST_RC=0
if SMI=$(command -v nvidia-smi); then
  smi smi-table nvidia-smi.txt
  smi smi-query nvidia-smi-query-gpu.csv "--query-gpu=$QUERY" --format=csv
  smi smi-query-tfgpu nvidia-smi-query-gpu-tfgpu.csv "--query-gpu=$TFGPU_QUERY" --format=csv,noheader,nounits
  smi smi-q nvidia-smi-q.txt -q
  smi smi-q-x nvidia-smi-q-x.xml -q -x
  smi smi-L nvidia-smi-L.txt -L
  smi smi-version nvidia-smi-version.txt --version
else
  record smi-table absent 0 nvidia-smi.txt nvidia-smi
fi
if [[ -e $PROC_VERSION ]]; then
  step proc-version 10 out proc-driver-nvidia-version.txt cat "$PROC_VERSION"
else
  record proc-version absent 0 proc-driver-nvidia-version.txt cat "$PROC_VERSION"
fi

# ---------------------------------------------------------------------------------------------- the doctor
step doctor-json 120 out doctor.json "$PY" -m tfgpu doctor --json
step doctor 60 out doctor.txt "$PY" -m tfgpu doctor
step compare 60 out compare.txt "$PY" "$HERE/gpu_check.py" compare "$W"

# ---------------------------------------------------------------------------------------------- JAX and PyTorch logs
# unbuffered: the lines in the order a terminal shows them; JAX_PLATFORMS=cuda: JAX fails instead of falling back
# to the CPU, so that the log shows why
for op in jax-ok jax-oom; do
  step "$op" "$OP_LIMIT" log "$op.log" env PYTHONUNBUFFERED=1 JAX_PLATFORMS=cuda "$PY" "$HERE/gpu_ops.py" "$op"
done
for op in torch-ok torch-oom; do
  step "$op" "$OP_LIMIT" log "$op.log" env PYTHONUNBUFFERED=1 "$PY" "$HERE/gpu_ops.py" "$op"
done
for op in jax-ok jax-oom torch-ok torch-oom; do
  step "explain-$op" 60 out "explain-$op.json" "$PY" -m tfgpu explain --json "$W/$op.log"
done

# ---------------------------------------------------------------------------------------------- timing
timing_budget=$(( $(left) - RESERVE - 10 ))
if (( timing_budget > 5 )); then
  step timing $((timing_budget + 5)) out timing.txt "$PY" "$HERE/gpu_check.py" timing "$W" --runs "$RUNS" \
    --python "$PY" --budget "$timing_budget"
else
  record timing skipped 0 timing.txt "$PY" "$HERE/gpu_check.py" timing "$W"
fi

# ---------------------------------------------------------------------------------------------- summary, archive
if ! timeout 30 "$PY" "$HERE/gpu_check.py" summary "$W" > "$W/summary.txt" 2> "$W/stderr/summary.txt"; then
  { echo "tfgpu GPU check: the summary could not be written (stderr/summary.txt); the steps:"; cat "$W/manifest.tsv"; } \
    > "$W/summary.txt"
fi
cp "$W/summary.txt" "$OUT_DIR/summary.txt"
tar -czf "$OUT_DIR/gpu-check.tar.gz" -C "$TMP" gpu-check
if (( $(wc -c < "$OUT_DIR/gpu-check.tar.gz") > 15 * 1024 * 1024 )); then  # the device hands back 16 MiB a file
  tar -czf "$OUT_DIR/gpu-check.tar.gz" -C "$TMP" --exclude='*.log' gpu-check
  echo "note: the logs were left out of gpu-check.tar.gz (over 15 MiB with them)" >> "$OUT_DIR/summary.txt"
fi
cat "$OUT_DIR/summary.txt"
head -1 "$W/summary.txt" | grep -q '^tfgpu GPU check: FAIL' && exit 1
exit 0
