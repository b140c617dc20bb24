#!/usr/bin/env bash
# Run notebooks on the GPU and copy back, in the same call, everything the run changed: each `run` call starts from a
# fresh copy of the working tree, so a second call no longer sees what the first one wrote (its results, executed
# copies and reports are overwritten by the tree's).
#   . /opt/gpukit/env.sh && bash tools/gpu-checks/notebook.sh 09_relax_models [10_networks ...]
# leaves $OUT/notebooks.tgz: every file under results/ and README.md the run wrote; unpack it in the
# tree: tar xzf notebooks.tgz -C /work/main
# LIMIT=SECONDS stops the run after that long and still copies back what it wrote by then (a `timeout` around this
# script would also stop the copy: the rows a run had measured were lost that way once).
set -uo pipefail
cd "$(dirname "$0")/../.."
(($#)) || { echo "usage: $0 NOTEBOOK_STEM..." >&2; exit 2; }
stamp=$(mktemp)   # the copy on the GPU host need not be a git checkout: what the run wrote is what is newer than this
${LIMIT:+timeout "$LIMIT"} make run-all PY="${PY:-python3}" NOTEBOOKS="$(printf 'notebooks/%s.ipynb ' "$@")"
status=$?
find results README.md -type f -newer "$stamp" >"${OUT:-/tmp}/changed.txt"
tar czf "${OUT:-/tmp}/notebooks.tgz" -T "${OUT:-/tmp}/changed.txt" &&
  echo "notebooks.tgz: $(wc -l <"${OUT:-/tmp}/changed.txt") files; tar xzf notebooks.tgz -C /work/main"
exit $status
