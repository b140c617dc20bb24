"""Where the CUDA compile happens with TVM 0.27 on this host, and what build / export / load cost for one CUDA module
(the harness's flush kernel and a MetaSchedule-style conv candidate)."""
import os
import tempfile
import time

import tvm
import tvm.s_tir.tensor_intrin  # noqa: E402,F401  (warms the import every tuning process makes)
from tvm.support import tar as tvm_tar

from tirbench.bench import harness
from tirbench.core.build import build_with_config, export_shared
from tirbench.core.machine import cuda_target
from tirbench.core.paths import project_root
from tirbench.tuning.database import best_schedule, open_database
from tirbench.tuning.tune import work_dir_for
from tirbench.workloads import conv2d


def _size(m, fmt):
    try:
        return len(m.inspect_source(fmt))
    except UnicodeDecodeError:  # binary (a cubin) that tvm_ffi tries to return as text
        return "binary"


def compiled(mod):
    return {f: _size(m, f) for m in mod.imports if m.kind == "cuda" for f in ("cubin", "fatbin", "ptx")}


print("CUDA runtime loaded:", tvm.runtime.enabled("cuda"), "| TVM_CUDA_COMPILE_MODE:",
      os.environ.get("TVM_CUDA_COMPILE_MODE", "nvrtc (default)"))
wl = conv2d(1, 256, 14, 14, 256, 3, 3, 1, 1)
wd = work_dir_for(project_root(), wl)
sch = best_schedule(open_database(wd), wl) if wd.exists() else None
mods = {"flush kernel": harness.l2_flush_executable().mod}
if sch is not None:
    t = time.perf_counter()
    mods["conv candidate (tuned f_build, under the target)"] = build_with_config({}, sch.mod, cuda_target(), None)
    print(f"build_with_config of the recorded best conv: {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    ex = tvm.compile(sch.mod, target=cuda_target())   # no target scope: what MetaSchedule's default_build does
    print(f"tvm.compile of it without a target scope: {time.perf_counter() - t:.2f} s, compiled {compiled(ex.mod)}")
for name, mod in mods.items():
    print(f"{name}: CUDA module holds {compiled(mod)} (non-zero cubin/fatbin: compiled at build time)")
    d = tempfile.mkdtemp()
    t = time.perf_counter()
    tar = os.path.join(d, "m.tar")
    mod.export_library(tar, fcompile=tvm_tar.tar)
    t_tar = time.perf_counter() - t
    t = time.perf_counter()
    so = export_shared(mod)
    t_so = time.perf_counter() - t
    for path, label in ((tar, "tar (stock export: linked at load)"), (so, "so (tuned export)")):
        t = time.perf_counter()
        loaded = tvm.runtime.load_module(path)
        t_load = time.perf_counter() - t
        print(f"   {label}: export {t_tar if path == tar else t_so:.2f} s, load {t_load:.2f} s, "
              f"loaded CUDA module holds {compiled(loaded)}")
