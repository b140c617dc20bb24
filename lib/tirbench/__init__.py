"""tirbench: the library behind the TensorIR GPU-kernel notebooks.

Sub-packages, from the bottom up (each imports only those below it):
  core       -- the machine (GPU? targets, peaks), the suite's TIR pipeline and build/export, generated CUDA and
                nvcc, project paths, one-line errors, atomic writes, progress bars; imports nothing else of tirbench
  workloads  -- TVMScript PrimFunc factories with numpy references and FLOP/byte counts
  schedules  -- schedule helpers ``fn(sch, *, tiles) -> sch`` by family (gemm, conv, intrinsics, common) and the
                kernel records that say which workloads each family takes, with which candidates
  bench      -- verify then time (harness), vendor baselines, one notebook run (session), the results CSV, plots,
                parameter checks, and ``sweep``: a record's candidates built in parallel, verified, timed
  tuning     -- MetaSchedule: design spaces, builders, runners, the kill-safe chunked tuner, databases, ``replay``,
                the CLI (``python -m tirbench.tuning``), RPC tuning over several GPUs (``tuning.rpc``)
  report     -- README tables, the overview notebook's data, the report index, ``make run-all``
"""
__version__ = "0.1.0"
