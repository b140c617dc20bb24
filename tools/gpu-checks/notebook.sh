#!/usr/bin/env bash
# Run notebooks on the GPU and copy back, in the same call, everything the run changed: each `run` call starts from a
# fresh copy of the working tree, so a second call no longer sees what the first one wrote (its results, executed
# copies and reports are overwritten by the tree's).
#   . /opt/gpukit/env.sh && bash tools/gpu-checks/notebook.sh 09_relax_models [10_networks ...]
# leaves $OUT/notebooks.tgz: every file under results/ and README.md that git sees as changed or new; unpack it in the
# tree: tar xzf notebooks.tgz -C /work/main
set -uo pipefail
cd "$(dirname "$0")/../.."
(($#)) || { echo "usage: $0 NOTEBOOK_STEM..." >&2; exit 2; }
make run-all PY="${PY:-python3}" NOTEBOOKS="$(printf 'notebooks/%s.ipynb ' "$@")"
status=$?
git status --porcelain --untracked-files=all -- results README.md | cut -c4- |
  while read -r f; do [ -f "$f" ] && echo "$f"; done >"${OUT:-/tmp}/changed.txt"   # deleted files: none to copy
tar czf "${OUT:-/tmp}/notebooks.tgz" -T "${OUT:-/tmp}/changed.txt" &&
  echo "notebooks.tgz: $(wc -l <"${OUT:-/tmp}/changed.txt") files; tar xzf notebooks.tgz -C /work/main"
exit $status
