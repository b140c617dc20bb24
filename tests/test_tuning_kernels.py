"""A kernel is measured once per database (``tirbench.tuning.kernels``): candidates that differ only in a decision
their built kernel does not use (as the wgmma space's stand-ins do) build the same code, hash the same in any builder
worker, and are recorded with the first one's run times, in this run and in the next; on llvm."""
from pathlib import Path

from tvm import s_tir
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

from tirbench.core.machine import cpu_target
from tirbench.tuning.builders import make_builder
from tirbench.tuning.history import history_trials
from tirbench.tuning.kernels import KERNELS_FILE, ReuseRunner, artifact_hash, read_kernels
from tirbench.tuning.mutators import MutateCategorical
from tirbench.tuning.runners import make_local_runner
from tirbench.tuning.spaces import DesignSpace
from tirbench.tuning.tune import tune
from tirbench.workloads import gemm

WL = gemm(16, 16, 16)
UNUSED = "tirbench.test_unused"


def unused_decision(sch: s_tir.Schedule) -> s_tir.Schedule:
    """A design whose only decision is an annotation the built code does not use (4 values, one kernel)."""
    choice = sch.sample_categorical([0, 1, 2, 3], [0.25] * 4)
    sch.annotate(sch.get_sblock("C"), UNUSED, choice)
    return sch


SPACE = DesignSpace(name="unused", description="test", check=lambda wl: None, schedule_fn=unused_decision,
                    pass_config=lambda wl: {}, db_suffix="_unused", mutator_probs=lambda: {MutateCategorical(): 1.0},
                    postprocs=lambda: [])


def annotated(value: int | None) -> s_tir.Schedule:
    sch = s_tir.Schedule(WL.mod)
    if value is not None:
        sch.annotate(sch.get_sblock("C"), UNUSED, value)
    return sch


@derived_object
class CountingRunner(ms.runner.PyRunner):
    """``inner``, counting the candidates it is given."""

    def __init__(self, inner: ms.runner.Runner) -> None:
        super().__init__()
        self.inner, self.count = inner, 0

    def run(self, runner_inputs: list[ms.runner.RunnerInput]) -> list[ms.runner.RunnerFuture]:
        self.count += len(runner_inputs)
        return self.inner.run(runner_inputs)


def build(schedules: list[s_tir.Schedule]) -> list[str]:
    results = make_builder(WL).build([ms.builder.BuilderInput(sch.mod, cpu_target()) for sch in schedules])
    assert all(r.error_msg is None for r in results)
    return [r.artifact_path for r in results]


def test_the_same_code_hashes_the_same_in_any_worker_and_other_code_differently():
    """Two modules that differ only in an annotation, built in separate worker processes (LLVM names its alias
    metadata after addresses in the building process), hash the same; a different loop order does not."""
    other = annotated(None)
    i, j, _ = other.get_loops(other.get_sblock("C"))
    other.reorder(j, i)
    paths = build([annotated(None), annotated(1), annotated(2), other])
    hashes = [artifact_hash(p) for p in paths]
    assert hashes[0] == hashes[1] == hashes[2] != hashes[3] and hashes[3] is not None


def test_a_batch_measures_each_kernel_once_and_the_next_run_measures_none(tmp_path: Path):
    paths = build([annotated(0), annotated(1), annotated(None)])
    args = ms.arg_info.ArgInfo.from_prim_func(WL.mod["main"])
    inputs = [ms.runner.RunnerInput(p, "cpu", args) for p in paths]
    inner = CountingRunner(make_local_runner("tuned"))
    results = [f.result() for f in ReuseRunner(inner, tmp_path).run(inputs)]
    assert inner.count == 1 and all(r.error_msg is None for r in results)
    secs = [[float(s) for s in r.run_secs] for r in results]
    assert secs[0] == secs[1] == secs[2] and list(read_kernels(tmp_path).values()) == [secs[0]]
    again = CountingRunner(make_local_runner("tuned"))
    later = [f.result() for f in ReuseRunner(again, tmp_path).run(inputs[:1])]   # a later run, same database
    assert again.count == 0 and [float(s) for s in later[0].run_secs] == secs[0]


def test_tuning_records_candidates_of_one_kernel_with_one_measurement(tmp_path: Path):
    """Three candidates (three values of the unused decision) are three trials with one run time: the tuning curve
    cannot rise from measuring one kernel again."""
    work_dir = tmp_path / "db"
    runner = CountingRunner(make_local_runner("tuned"))
    tune(WL, work_dir, trials=3, chunk=3, target=cpu_target(), space=SPACE, builder=make_builder(WL, SPACE),
         runner=runner)
    trials = history_trials(work_dir)
    assert len(trials) == 3 and len({t.run_s for t in trials}) == 1
    assert runner.count == 1 and len((work_dir / KERNELS_FILE).read_text().splitlines()) == 2
