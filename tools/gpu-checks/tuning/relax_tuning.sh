#!/usr/bin/env bash
# Issue 44: MetaSchedule on notebook 09's whole models, each model and config for a wall-clock budget (a GPU's
# time is what limits it, not a trial count): `python -m tirbench.tuning.relax_model MODEL --config CONFIG` stopped
# after SECONDS, then its database repaired (a record cut off by the stop dropped), compacted and its history
# synced, as a run that ends by itself leaves it. The tasks without records are tuned first, one turn each, the most
# time first, each task's records written when it is measured: a stop keeps every task that finished its turn, and a
# later call goes on with the others (the first turn of ResNet-50 fp16's 30 tasks: ~30-55 s a task on an H200 host
# at MetaSchedule's default population, 2026-11-28, none recorded: that run used the gradient scheduler, which
# writes nothing before every task had its turn).
#   . /opt/gpukit/env.sh && bash tools/gpu-checks/tuning/relax_tuning.sh resnet50:fp16:180 mobilenet_v2:fp16:150
# leaves $OUT/relax.tgz (results/tuning/relax); unpack it in the tree: tar xzf relax.tgz -C /work/main
set -uo pipefail
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD/lib PYTHONUNBUFFERED=1
mkdir -p build/relax_tuning results/tuning/relax
for spec in "$@"; do   # MODEL:CONFIG:SECONDS
  IFS=: read -r model config secs <<<"$spec"
  log=build/relax_tuning/${model}_$config.log
  start=$(date +%s)
  timeout -k 10 "$secs" "${PY:-python3}" -m tirbench.tuning.relax_model "$model" --config "$config" --trials 100000 >"$log" 2>&1
  echo "== $model $config: exit $? after $(($(date +%s) - start)) s"
  tr '\r' '\n' <"$log" | grep -E "^\[tuning\]|^relax_model|rror|Total trials" | tail -4
  "${PY:-python3}" - "$model" "$config" <<'EOF'
import sys
from tirbench.compile.models import CONFIGS
from tirbench.core.paths import project_root
from tirbench.tuning.database import compact_database, repair_database
from tirbench.tuning.history import sync_history, trials_done
from tirbench.tuning.relax_model import work_dir_for

work_dir = work_dir_for(project_root(), sys.argv[1], CONFIGS[sys.argv[2]])
if work_dir.exists():
    dropped = repair_database(work_dir)
    compact_database(work_dir)
    sync_history(work_dir)
    print(f"{work_dir}: {trials_done(work_dir)} trials recorded ({dropped} cut-off line(s) dropped)")
else:
    print(f"{work_dir}: nothing recorded")
EOF
done
tar czf "${OUT:-/tmp}/relax.tgz" results/tuning/relax build/relax_tuning && echo "relax.tgz: tar xzf relax.tgz -C /work/main"
