#!/usr/bin/env bash
# Issue 42 part 3: record notebook 10's choices (python -m tirbench.bench.networks choose) on every GPU of the host at
# once, one process per GPU (CUDA_VISIBLE_DEVICES), each a group of networks and configs; a GPU with several groups
# runs them one after the other. Every process stops before SECONDS (default 500: `plan` and the copies take the rest
# of a 10-minute call) from the start of this script, merging what it chose into results/10_networks/choices.csv under
# a lock as it goes; that file, each group's log and the `plan` of what is left go to $OUT (default
# build/networks_choose). The same command goes on where the last one stopped, once $OUT/choices.csv is copied back to
# results/10_networks/choices.csv (each `run` call starts from the working tree).
#
#   . /opt/gpukit/env.sh && pip install -q --no-deps --no-build-isolation -e . >/dev/null && \
#     bash tools/gpu-checks/networks_choose.sh [SECONDS]
set -u
LIMIT=${1:-500}
OUT=${OUT:-build/networks_choose}
mkdir -p "$OUT"
# Longest first, by `python -m tirbench.bench.networks plan` (fp16 about 16 s a layer, fp32 4 s, int8 6 s on an H200);
# ResNet-50's layers come from notebook 08's choices.
JOBS=("inception_v3 --config fp16" "mobilenet_v2 --config fp16" "resnext50_32x4d convnext_tiny --config fp16 fp32 int8"
      "inception_v3 --config fp32 int8" "mobilenet_v2 --config fp32 int8")
GPUS=$(nvidia-smi -L | wc -l)
START=$(date +%s)

run_gpu() {   # the jobs i with i % GPUS == $1, one after the other, each until the script's deadline
  local gpu=$1 i left
  for ((i = gpu; i < ${#JOBS[@]}; i += GPUS)); do
    left=$((START + LIMIT - $(date +%s)))
    if ((left < 90)); then echo "job $i (${JOBS[$i]}): not started, ${left} s left" >"$OUT/choose_$i.log"; continue; fi
    # shellcheck disable=SC2086 - a job is its words
    CUDA_VISIBLE_DEVICES=$gpu python3 -m tirbench.bench.networks choose ${JOBS[$i]} --max-seconds "$left" \
      >"$OUT/choose_$i.log" 2>&1
    echo "job $i (${JOBS[$i]}) on GPU $gpu: exit $?" >>"$OUT/choose_$i.log"
  done
}

for ((g = 0; g < GPUS && g < ${#JOBS[@]}; g++)); do run_gpu "$g" & done
wait
tail -n 3 "$OUT"/choose_*.log
cp results/10_networks/choices.csv "$OUT/choices.csv"
python3 -m tirbench.bench.networks plan | tee "$OUT/plan.txt"
