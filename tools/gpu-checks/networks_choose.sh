#!/usr/bin/env bash
# Issue 42 part 3: record notebook 10's choices (python -m tirbench.bench.networks choose) on every GPU of the host at
# once, one process per GPU (CUDA_VISIBLE_DEVICES), each a group of networks and configs; a GPU with several groups
# runs them one after the other (a host of one GPU runs them all in one process). Every process stops before SECONDS
# (default 500: `plan` and the copies take the rest of a 10-minute call) from the start of this script, merging what
# it chose into results/10_networks/choices.csv under a lock as it goes; that file, each group's log and the `plan` of
# what is left go to $OUT (default build/networks_choose). The same command goes on where the last one stopped, once
# $OUT/choices.csv is copied back to results/10_networks/choices.csv (each `run` call starts from the working tree).
#
#   . /opt/gpukit/env.sh && PYTHONPATH=$PWD/lib bash tools/gpu-checks/networks_choose.sh [SECONDS]
set -u
LIMIT=${1:-500}
OUT=${OUT:-build/networks_choose}
mkdir -p "$OUT"
# Longest first (on an H200, 2026-11-28: fp16 3-6 s a layer, ResNeXt's and ConvNeXt's grouped and depthwise layers
# 11-18 s; fp32 and int8 about 3 s); ResNet-50's layers come from notebook 08's choices.
JOBS=("inception_v3 --config fp16" "mobilenet_v2 --config fp16" "resnext50_32x4d convnext_tiny --config fp16 fp32 int8"
      "inception_v3 --config fp32 int8" "mobilenet_v2 --config fp32 int8")
python3 -c "import tirbench" || { echo "tirbench is not importable: set PYTHONPATH=\$PWD/lib" >&2; exit 2; }
GPUS=$(nvidia-smi -L | wc -l)
if ((GPUS == 1)); then   # one process for all: its build workers start once (about 20 s a process)
  JOBS=("inception_v3 mobilenet_v2 resnext50_32x4d convnext_tiny --config fp16 fp32 int8")
fi
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
