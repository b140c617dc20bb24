#!/usr/bin/env bash
# Issue 43: notebook 08's 23 fp32 batch-1 layers x TRIALS trials (default 32) in the `rules` space, from fresh
# databases, on 1, 4 and 2 GPUs of this host one after the other (GPUS="1 4 2": `python -m tirbench.tuning.spread
# --gpus G resnet50`, its builds on the host's cores / G; the 1-GPU reference first, the longest run, so that a
# machine lost between `run` calls still leaves it), each in its own copy of the tree under /tmp/scale/G
# with the layers' `rules`-space databases removed; POPULATION=N the search's population (default MetaSchedule's 512);
# CORES_PER_TASK=N passes `--cores-per-task N` to every run, KILL=0 skips the worker-kill run, WORK=DIR
# another folder (a second set of runs beside the first). The runs outlive the `run` calls (their own process session; the
# machine keeps such a process until it goes back).
#   first call:  . /opt/gpukit/env.sh && bash tools/gpu-checks/tuning/spread_scaling.sh start && \
#                bash tools/gpu-checks/tuning/spread_scaling.sh wait 560
#   next calls:  . /opt/gpukit/env.sh && bash tools/gpu-checks/tuning/spread_scaling.sh wait 590
# wait SECONDS: wait that long or until every run has ended, print their progress (and how many tasks started a
# tuning process: one per GPU where the workers stay warm), and leave $OUT/scaling.tgz: each copy's
# results/tuning/network_tuning.csv, databases and task logs (scale/G/...). Unpack it here under build/:
#   tar xzf scaling.tgz -C /work/main/build
# then append the rows to results/tuning/network_tuning.csv and copy scale/4's databases into results/tuning/conv2d
# for notebook 08's MetaSchedule column (its replay against the 1-GPU databases' is the issue's check).
set -uo pipefail
cd "$(dirname "$0")/../../.."
WORK=${WORK:-/tmp/scale}
GPUS=${GPUS:-1 4 2}
TRIALS=${TRIALS:-32}
POPULATION=${POPULATION:-512}
CORES_PER_TASK=${CORES_PER_TASK:-}   # default: spread's own (the host's cores / GPUs); the host's count oversubscribes
KILL=${KILL:-1}

case "${1:-}" in
  start)
    rm -rf "$WORK" && mkdir -p "$WORK"
    for g in $GPUS; do
      mkdir -p "$WORK/$g"
      tar --exclude=./.gpukit --exclude=./build --exclude=./.venv -cf - . | tar -xf - -C "$WORK/$g"
      rm -rf "$WORK/$g"/results/tuning/conv2d/*_rulesspace
    done
    WORK=$WORK GPUS=$GPUS TRIALS=$TRIALS POPULATION=$POPULATION CORES_PER_TASK=$CORES_PER_TASK KILL=$KILL setsid "$0" runs >"$WORK/scaling.log" 2>&1 </dev/null &
    echo "tuning resnet50 x $TRIALS trials (population $POPULATION) on $GPUS GPUs, one run after the other, in $WORK; log $WORK/scaling.log"
    ;;
  runs)  # (started by `start`) each GPU count in its copy, one after the other; then the replay check and a kill
    for g in $GPUS; do
      (while :; do cut -d' ' -f1 /proc/loadavg; sleep 10; done >"$WORK/load_$g.log") & sampler=$!
      (cd "$WORK/$g" && PYTHONPATH=$PWD/lib PYTHONUNBUFFERED=1 MPLBACKEND=Agg TIRBENCH_ROOT=$PWD \
        python3 -m tirbench.tuning.spread --gpus "$g" ${CORES_PER_TASK:+--cores-per-task "$CORES_PER_TASK"} \
        resnet50 --trials "$TRIALS" --population "$POPULATION" >"$WORK/run_$g.log" 2>&1)
      echo "$g GPUs: exit $? at $(date -u +%H:%M:%S)"
      kill "$sampler"
    done
    counts=$(tr ' ' '\n' <<<"$GPUS" | grep . | sort -n)
    one=$(head -1 <<<"$counts") most=$(tail -1 <<<"$counts")   # the fewest GPUs' databases the reference
    (cd "$WORK/$one" && PYTHONPATH=$PWD/lib PYTHONUNBUFFERED=1 python3 tools/gpu-checks/tuning/network_replay.py \
      "$WORK/$one" "$WORK/$most" --csv "$WORK/replay.csv" >"$WORK/replay.log" 2>&1)
    echo "replay of the $one- and $most-GPU databases: exit $? at $(date -u +%H:%M:%S)"
    if [ "$KILL" = 1 ]; then
      bash "$WORK/$one/tools/gpu-checks/tuning/spread_scaling.sh" kill >"$WORK/kill.log" 2>&1
      echo "worker killed mid-task: exit $? at $(date -u +%H:%M:%S)"
    fi
    touch "$WORK/DONE"
    ;;
  kill)  # three s4 layers x 16 trials (chunks of 8) on 2 GPUs into fresh databases; worker gpu-1 killed (its whole process group)
         # once its tuning process (tirbench.tuning.warm) runs and a task has records; Dask re-runs its task on gpu-0,
         # which resumes from the database
    layers=(1 2048 7 7 512 1 1 1 0  1 512 7 7 2048 1 1 1 0  1 512 7 7 512 3 3 1 1)
    rm -rf "$WORK/kill" && mkdir -p "$WORK/kill" && cp -r lib "$WORK/kill/"
    cd "$WORK/kill" || exit 2
    PYTHONPATH=$PWD/lib PYTHONUNBUFFERED=1 TIRBENCH_ROOT=$PWD python3 -m tirbench.tuning.spread --gpus 2 conv2d \
      "${layers[@]}" --space rules --trials 16 --chunk 8 --population "$POPULATION" --db "$WORK/kill/db" >"$WORK/kill/spread.log" 2>&1 &
    spread_pid=$!
    for _ in $(seq 300); do
      group=$(pgrep -f -- "--name gpu-1" | head -1)
      [ -n "$group" ] && pgrep -g "$group" -f "tirbench.tuning.warm" >/dev/null && break
      sleep 1
    done
    for _ in $(seq 90); do   # until a task has records (its seeds), then a little more
      [ -n "$(find db -name database_tuning_record.json -size +0 2>/dev/null)" ] && break
      sleep 1
    done
    sleep 5
    echo "trials per task before the kill: $(find db -name database_tuning_record.json -exec wc -l {} + | head -3)"
    echo "killing worker gpu-1 (process group $group): $(ps -o pid=,args= -g "$group" | grep -c .) processes"
    kill -9 -- "-$group"
    wait "$spread_pid"; rc=$?
    tr '\r' '\n' <spread.log | grep -E "^\[spread\]|rror" | tail -5
    echo "spread exit status $rc; trials per task after: $(find db -name database_tuning_record.json -exec wc -l {} +)"
    exit "$rc"
    ;;
  wait)
    end=$(($(date +%s) + ${2:-590}))
    while [ "$(date +%s)" -lt "$end" ] && [ ! -e "$WORK/DONE" ]; do sleep 5; done
    cat "$WORK/scaling.log"
    for log in "$WORK"/run_*.log; do
      [ -e "$log" ] && { echo "== $log"; tr '\r' '\n' <"$log" | grep -E "^\[spread\]|rror|Killed" | tail -8; }
    done
    for g in $GPUS; do   # the host's load (1-minute average, sampled every 10 s) while each run went on
      fmt="%s GPU(s): load mean %.1f, max %.1f of %d cores (%d samples)\n"
      [ -s "$WORK/load_$g.log" ] && awk -v g="$g" -v n="$(nproc)" -v fmt="$fmt" \
        '{s += $1; if ($1 > m) m = $1} END {printf fmt, g, s / NR, m, n, NR}' "$WORK/load_$g.log"
    done
    for g in $GPUS; do   # warm workers: G tasks start a tuning process (builder, runner, tensor intrinsics), the rest reuse it
      logs=$(ls "$WORK/$g"/build/spread/*/task-*.log 2>/dev/null) || continue
      lines=$(cat $logs | tr '\r' '\n')
      ready=$(grep -o 'ready in [0-9.]* s' <<<"$lines" | awk '{print $3}' | paste -sd' ')
      seeds=$(grep -o 'seeds measured in [0-9.]* s' <<<"$lines" | awk '{print $4}' | paste -sd' ')
      echo "$g GPU(s): $(grep -l 'ready in' $logs | wc -l) of $(wc -l <<<"$logs") tasks started a tuning process," \
        "ready in $ready s; seeds measured in $seeds s"
    done
    for log in "$WORK/replay.log" "$WORK/kill.log"; do [ -e "$log" ] && { echo "== $log"; tail -30 "$log"; }; done
    [ -e "$WORK/DONE" ] && echo "every run ended" || echo "runs go on"
    (cd "$WORK" && tar czf "${OUT:-/tmp}/scaling.tgz" --exclude=logs $(ls replay.csv replay.log kill.log load_*.log 2>/dev/null) \
      $(for g in $GPUS; do [ -d "$g" ] && (cd "$g" && ls -d results/tuning/network_tuning.csv \
        results/tuning/conv2d/*_rulesspace build/spread 2>/dev/null | sed "s|^|$g/|"); done) \
      --transform 's|^|scale/|') && echo "scaling.tgz: unpack with: tar xzf scaling.tgz -C /work/main/build"
    ;;
  *) echo "usage: $0 start | wait SECONDS" >&2; exit 2 ;;
esac
