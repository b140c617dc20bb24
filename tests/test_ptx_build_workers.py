"""A build for an older architecture than the GPU's compiles PTX in ``build_all``'s worker processes too: they have
no GPU context to tell, so the caller says so in each job (found on an H200: sm_75/sm_80 notebook runs loaded sm_XY
cubins built by the workers, CUDA_ERROR_NO_BINARY_FOR_GPU)."""
from tvm.support.popen_pool import StatusKind

from tirbench.bench import harness
from tirbench.core.machine import target_for
from tirbench.workloads import vector_add


class _Recorder:
    """A stand-in for the build pool that keeps the jobs and fails each build."""

    def __init__(self):
        self.jobs = []

    def map_with_error_catching(self, fn, jobs):
        self.jobs = list(jobs)
        return [type("R", (), {"status": StatusKind.EXCEPTION, "value": "not built"})() for _ in self.jobs]


def _jobs(monkeypatch, older: bool) -> list[tuple]:
    pool = _Recorder()
    monkeypatch.setattr(harness, "_build_pool", lambda cuda: pool)
    monkeypatch.setattr(harness, "builds_ptx", lambda arch: older)
    harness.build_all([vector_add(1024).mod], target_for("sm_80"))
    return pool.jobs


def test_jobs_for_an_older_arch_than_the_gpu_say_ptx(monkeypatch):
    assert [job[3] for job in _jobs(monkeypatch, older=True)] == ["sm_80"]
    assert [job[3] for job in _jobs(monkeypatch, older=False)] == [None]


def test_a_worker_given_a_ptx_arch_compiles_to_ptx(monkeypatch):
    used = []
    monkeypatch.setattr(harness, "use_ptx", used.append)
    monkeypatch.setattr(harness, "export_shared", lambda mod: "lib.so")
    monkeypatch.setattr(harness, "build_with_config", lambda *args: None)
    assert harness._build_to_library((vector_add(1024).mod, target_for("sm_80"), None, "sm_80")) == "lib.so"
    assert harness._build_to_library((vector_add(1024).mod, target_for("sm_80"), None, None)) == "lib.so"
    assert used == ["sm_80"]
