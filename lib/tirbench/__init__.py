"""tirbench: the library behind the TensorIR GPU-kernel notebooks.

Modules, by what they hold:
  machine    -- is there a CUDA GPU, its name/driver, the CUDA and CPU targets, the peak table
  workloads  -- TVMScript PrimFunc factories with numpy references and FLOP/byte counts
  schedules  -- schedule helpers ``fn(sch, *, tiles) -> sch`` that reject bad tiles with ValueError
  harness    -- build, verify against the reference, only then time (TVM and torch by the same rules)
  session    -- one notebook run: mode banner, measured rows, atomic commit, recorded rows on CPU
  results    -- the CSV schema and its atomic writer/strict reader
  plots      -- one plotting helper: a line/bar per provider, vendor baseline, % of peak; atomic figure saving
  cuda_source -- show generated CUDA and check it with nvcc
  tuning     -- MetaSchedule: chunked, kill-safe tuning into JSON databases, replay, tuning curves
  report     -- README results table regenerated from results/*.csv
  overview   -- notebook 00: latest run per GPU per workload, roofline, tuning curves (reads, measures nothing)
  index      -- the report index (reports/index.html)
  run_all    -- what `make run-all` runs: every notebook, reports, index; goes on after a failure
  params     -- a notebook's parameter checks (one-line ParameterError in its first cell)
  errors     -- errors a notebook shows as one line
  atomic     -- atomic file replacement
  progress   -- tqdm bars showing the best rate so far (sweeps, tuning)
"""
__version__ = "0.1.0"
