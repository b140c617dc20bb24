"""Tuning for an older architecture than the GPU's: the builder's workers compile PTX for it (``worker_init``), as
``build_all``'s do (``tests/test_ptx_build_workers.py``); a native build registers only what the candidates need."""
from tirbench.tuning import builders
from tirbench.workloads import conv2d, gemm


def test_builder_workers_compile_ptx_for_an_older_arch(monkeypatch):
    monkeypatch.setattr(builders, "builds_ptx", lambda arch: arch == "sm_80")
    init = builders.worker_init(gemm(64, 64, 64), arch="sm_80")
    assert init.args == (False, "sm_80")
    init = builders.worker_init(conv2d(1, 64, 8, 8, 64, layout="NHWC", dtype="float16"), arch="sm_80")
    assert init.args == (True, "sm_80")
    assert builders.worker_init(gemm(64, 64, 64), arch="sm_90a") is None
    assert builders.worker_init(gemm(64, 64, 64, dtype="float16"), arch="sm_90a").args == (True, None)
