"""tirbench: the library behind the TensorIR GPU-kernel notebooks.

Modules, by what they hold:
  machine    -- is there a CUDA GPU, its name/driver, the CUDA and CPU targets, the peak table
  workloads  -- TVMScript PrimFunc factories with numpy references and FLOP/byte counts
  schedules  -- schedule helpers ``fn(sch, *, tiles) -> sch`` that reject bad tiles with ValueError
  harness    -- build, verify against the reference, only then time (TVM and torch by the same rules)
  session    -- one notebook run: mode banner, measured rows, atomic commit, recorded rows on CPU
  results    -- the CSV schema and its atomic writer/reader
  plots      -- one plotting helper: a line/bar per provider, vendor baseline, % of peak
  cuda_source -- show generated CUDA and check it with nvcc
  report     -- README results table regenerated from results/*.csv
"""
__version__ = "0.1.0"
