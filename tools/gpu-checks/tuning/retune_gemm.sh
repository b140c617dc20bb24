#!/usr/bin/env bash
# Issue #17 part 4: MetaSchedule's default rules on the 4096^3 GEMM toward 512 trials, one bounded chunk per `run` call.
#   . /opt/gpukit/env.sh && bash tools/gpu-checks/tuning/retune_gemm.sh float16 480
# (dtype, seconds; about 21 trials/min for float16, 6 for float32 on an H100). Resumes from the database in the tree and
# leaves $OUT/tuning.tgz (that database + throughput.csv): unpack it here before the next call, which otherwise starts
# again from the committed records (each call copies the local tree).
set -uo pipefail
cd "$(dirname "$0")/../../.."
DTYPE=${1:-float16}
SECONDS_LEFT=${2:-480}
export PYTHONPATH=$PWD/lib PYTHONUNBUFFERED=1 MPLBACKEND=Agg
timeout $((SECONDS_LEFT + 60)) python3 -m tirbench.tuning gemm 4096 4096 4096 --dtype "$DTYPE" --trials 512 --chunk 48 \
  --seconds "$SECONDS_LEFT" 2>&1 | tr '\r' '\n' | grep -E "tuning\]|seconds per trial|rror" | grep -v "^tuning "
tar czf "${OUT:-build}/tuning.tgz" --exclude=logs results/tuning/throughput.csv \
  "results/tuning/gemm/${DTYPE}_4096x4096x4096" && echo "tuning.tgz: unpack with: tar xzf tuning.tgz -C /work/main"
