#!/usr/bin/env bash
# Issue #17 part 4: MetaSchedule's default rules on the 4096^3 GEMM, float16 then float32, toward 512 trials each
# (TRIALS=1024 DTYPES=float32 in start's environment: a larger budget, or one dtype).
# The tuning outlives the `run` calls: it runs in its own process session (the machine keeps such a process until it
# goes back) in a copy of the tree under /tmp/retune, out of the way of the tree each call copies over the repo.
#   first call:  . /opt/gpukit/env.sh && bash tools/gpu-checks/tuning/retune_gemm.sh start 1750 && \
#                bash tools/gpu-checks/tuning/retune_gemm.sh wait 560
#   next calls:  bash tools/gpu-checks/tuning/retune_gemm.sh wait 590
# start SECONDS: tune for at most SECONDS in all, one process per dtype (the builder pool, the tensor-intrinsic import
# and the runner's arguments are made once per dtype). wait SECONDS: wait that long or until the tuning has ended,
# print its progress lines, and leave $OUT/tuning.tgz: both databases and throughput.csv as they are now (records
# are written as they are measured). Unpack it here: tar xzf tuning.tgz -C /work/main
set -uo pipefail
cd "$(dirname "$0")/../../.."
WORK=/tmp/retune
DBS="results/tuning/gemm/float16_4096x4096x4096 results/tuning/gemm/float32_4096x4096x4096"
TRIALS=${TRIALS:-512}
DTYPES=${DTYPES:-float16 float32}

case "${1:-}" in
  start)
    rm -rf "$WORK" && mkdir -p "$WORK"
    tar --exclude=./.gpukit --exclude=./build --exclude=./.venv -cf - . | tar -xf - -C "$WORK"
    deadline=$(($(date +%s) + ${2:-1750}))
    TRIALS=$TRIALS DTYPES=$DTYPES setsid "$WORK/tools/gpu-checks/tuning/retune_gemm.sh" tune "$deadline" \
      >"$WORK/retune.log" 2>&1 </dev/null &
    echo "tuning $DTYPES to $TRIALS trials in $WORK until $(date -u -d "@$deadline" +%H:%M:%S) UTC; log $WORK/retune.log"
    ;;
  tune)  # (started by `start`, in the copy) until the deadline $2, in epoch seconds
    export PYTHONPATH=$PWD/lib PYTHONUNBUFFERED=1 MPLBACKEND=Agg TIRBENCH_ROOT=$PWD
    for dtype in $DTYPES; do
      left=$(($2 - $(date +%s)))
      [ "$left" -gt 120 ] || break
      timeout "$((left + 30))" python3 -m tirbench.tuning gemm 4096 4096 4096 --dtype "$dtype" --trials "$TRIALS" \
        --chunk 48 --seconds "$left"
    done
    touch DONE
    ;;
  wait)
    end=$(($(date +%s) + ${2:-590}))
    while [ "$(date +%s)" -lt "$end" ] && [ ! -e "$WORK/DONE" ]; do sleep 5; done
    tr '\r' '\n' <"$WORK/retune.log" | grep -E "tuning\]|seconds per trial|rror|Killed" | grep -v "^tuning "
    [ -e "$WORK/DONE" ] && echo "tuning ended" || echo "tuning goes on"
    tar czf "${OUT:-build}/tuning.tgz" -C "$WORK" --exclude=logs results/tuning/throughput.csv $DBS &&
      echo "tuning.tgz: unpack with: tar xzf tuning.tgz -C /work/main"
    ;;
  *) echo "usage: $0 start SECONDS | wait SECONDS" >&2; exit 2 ;;
esac
