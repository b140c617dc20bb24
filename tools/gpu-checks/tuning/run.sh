#!/usr/bin/env bash
# Issue #17 pilot on ONE H100/H200 (about 6 minutes), from the repository root:   bash tools/gpu-checks/tuning/run.sh
# Needs the GPU stack: /opt/gpukit (the offline kit, installed first) or .venv with requirements-gpu.txt.
# 1. probe_fork.py: import tvm, fork, use CUDA in the child: default environment (expected: cudaErrorInitialization-
#    Error, torch.cuda.is_available() ran at import) vs TVM_FFI_DISABLE_TORCH_C_DLPACK=1 PYTORCH_NVML_BASED_CUDA_CHECK=1.
# 2. probe_build.py: does tvm.compile of a CUDA module compile the CUDA at build time here (cubin in the module)?
#    time of build, export (tar / so), load (the tar is linked at load) and first launch.
# 3. stock, then tuned, on the batch-1 3x3 conv 1x256x14x14 -> 256 (NCHW fp32), default rules, same budget, each into
#    a fresh database (build/pilot-tuning/db-*): trials/min, best, and per chunk "seconds per trial: search, builder,
#    runner, ..." (the phases); rows appended to results/tuning/throughput.csv.
# 4. RPC smoke: tirbench.tuning.rpc.cluster (tracker + one tirbench.tuning.rpc.server on GPU 0), 16 trials through --rpc.
# 5. summary.py: the throughput rows of this pilot, tuned/stock ratio, each database's best kernel as MetaSchedule
#    recorded it and as the harness times it (verify_then_time, L2 flushed, median of 100).
# Files back under $OUT: pilot.log (everything), summary.txt, throughput.csv (the whole file after the pilot),
# phases-{stock,tuned,rpc}.csv.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-build/pilot-tuning/out}
WORK=build/pilot-tuning
TRIALS=${TRIALS:-48}
CHUNK=${CHUNK:-24}
CONV="conv2d 1 256 14 14 256 3 3 1 1"
mkdir -p "$OUT" "$WORK"
rm -rf "$WORK"/db-*
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
if [ -f /opt/gpukit/env.sh ]; then
  . /opt/gpukit/env.sh && python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null || exit 1
  PY=python3
else
  make -s .venv/.installed && PY=.venv/bin/python || exit 1
fi
START=$(date -u +%Y-%m-%dT%H:%M:%S+00:00)
{
  echo "== pilot start $START on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "== 1. fork probe"
  timeout 120 $PY tools/gpu-checks/tuning/probe_fork.py
  echo "== 2. build probe"
  timeout 180 $PY tools/gpu-checks/tuning/probe_build.py
  for setup in stock tuned; do
    echo "== 3. $setup: $CONV, $TRIALS trials in chunks of $CHUNK"
    t0=$(date +%s)
    timeout 330 $PY -m tirbench.tuning $CONV --trials "$TRIALS" --chunk "$CHUNK" --setup $setup --seconds 270 \
      --db "$WORK/db-$setup" 2>&1 | grep -v -E "^\s*$|XGB iter|\[DEBUG\]" | grep -E "tuning\]|seconds per trial|rror|Traceback|^  File" | tr '\r' '\n' | grep -v "^tuning "
    echo "   wall $(( $(date +%s) - t0 )) s"
  done
  echo "== 4. RPC smoke: tracker + 1 server, 16 trials through --rpc"
  t0=$(date +%s)
  CUDA_VISIBLE_DEVICES=0 timeout 240 $PY -m tirbench.tuning.rpc.cluster --port 9190 --key h100 tune $CONV --trials 16 \
    --chunk 16 --db "$WORK/db-rpc" 2>&1 | tr '\r' '\n' | grep -E "rpc_cluster|tuning\]|seconds per trial|rror|Traceback|^  File"
  echo "   wall $(( $(date +%s) - t0 )) s (exit ${PIPESTATUS[0]})"
  tail -5 build/rpc-cluster/server-0.log 2>/dev/null | sed 's/^/   server-0.log: /'
  echo "== 5. summary"
  timeout 180 $PY tools/gpu-checks/tuning/summary.py "$START" "$WORK" | tee "$OUT/summary.txt"
} 2>&1 | tee "$OUT/pilot.log"
cp results/tuning/throughput.csv "$OUT/throughput.csv" 2>/dev/null
for s in stock tuned rpc; do cp "$WORK"/db-$s/conv2d/*/tuning_phases.csv "$OUT/phases-$s.csv" 2>/dev/null; done
ls "$OUT"
