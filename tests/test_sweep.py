"""``sweep``: every candidate built, verified and timed (here on llvm), each outcome one line, a family whose every
candidate fails raises naming it."""
from __future__ import annotations

import pytest
from tvm import s_tir

from tirbench.bench import sweep as sweep_module
from tirbench.bench.sweep import SweepError, one_line, sweep, sweep_all
from tirbench.core.machine import cpu_target
from tirbench.schedules.common.record import KernelRecord, takes
from tirbench.workloads import gemm


def split_k(sch: s_tir.Schedule, *, factor: int = 4) -> s_tir.Schedule:
    """A CPU schedule with a parameter that must divide k."""
    if 64 % factor:
        raise ValueError(f"factor={factor} does not divide k=64")
    blk = sch.get_sblock("C")
    k = sch.get_loops(blk)[-1]
    sch.split(k, factors=[None, factor])
    return sch


def broken(sch: s_tir.Schedule, **_: object) -> s_tir.Schedule:
    raise RuntimeError("scheduling failed\nfor a reason")


FP32 = takes("C", ("float32",))
GOOD = KernelRecord("good", split_k, {"factor": 4}, FP32, candidates=({"factor": 8}, {"factor": 5}, {"factor": 16}))
BAD = KernelRecord("bad", broken, {}, FP32, candidates=({"x": 1}, {"x": 2}))
FP16_ONLY = KernelRecord("fp16_only", split_k, {"factor": 4}, takes("C", ("float16",)))


def test_sweep_measures_skips_and_keeps_the_best(capsys) -> None:
    res = sweep(gemm(64, 64, 64), [GOOD, FP16_ONLY], target=cpu_target(), repeats=3)
    status = {(t.record.name, t.overrides.get("factor")): t.status for t in res.trials}
    assert status == {("good", 8): "ok", ("good", 5): "skipped", ("good", 16): "ok", ("fp16_only", None): "skipped"}
    assert res.best(GOOD, variant="good_best").variant == "good_best"
    assert res.best_trial().overrides["factor"] in (8, 16)
    out = capsys.readouterr()
    assert "good(factor=5): skipped (factor=5 does not divide k=64)" in out.out + out.err
    assert "takes float16 inputs, not float32" in out.out + out.err
    assert list(res.table()["status"]) == ["skipped", "skipped", "ok", "ok"]


def test_defaults_only_measures_each_record_once() -> None:
    res = sweep(gemm(64, 64, 64), [GOOD], target=cpu_target(), repeats=3, defaults_only=True)
    assert [(t.overrides, t.status) for t in res.trials] == [({}, "ok")]
    assert [m.variant for m in res.measurements()] == ["good"]


def test_a_family_whose_every_candidate_fails_raises_naming_it() -> None:
    with pytest.raises(SweepError, match=r"^bad: every candidate failed on gemm 64x64x64 .*scheduling failed|for a"):
        sweep(gemm(64, 64, 64), [GOOD, BAD], target=cpu_target(), repeats=3)


def test_not_strict_prints_the_failed_family_and_keeps_the_others(capsys) -> None:
    res, = sweep_all([(gemm(64, 64, 64), [GOOD, BAD])], target=cpu_target(), repeats=3, strict=False)
    assert "bad: every candidate failed on gemm 64x64x64" in capsys.readouterr().out
    assert res.best_trial().record.name == "good" and any(t.status == "rejected" for t in res.trials)


def test_sweep_all_builds_every_workloads_candidates_in_one_batch(monkeypatch) -> None:
    """Two workloads, their candidates built by one ``build_by_config`` call, each result its own; a measured
    trial keeps its built kernel (to run it again, e.g. for its error)."""
    calls = []
    real = sweep_module.build_by_config
    monkeypatch.setattr(sweep_module, "build_by_config",
                        lambda jobs, target: calls.append(len(jobs)) or real(jobs, target))
    small, large = gemm(64, 64, 64), gemm(64, 32, 64)
    res = sweep_all([(small, GOOD), (large, [GOOD.with_candidates(({"factor": 16},))])], target=cpu_target(),
                    repeats=3)
    assert calls == [3] and [r.workload for r in res] == [small, large]
    assert [t.overrides.get("factor") for t in res[1].trials] == [16] and res[1].best_trial().kernel is not None
    assert {t.overrides.get("factor"): t.status for t in res[0].trials} == {5: "skipped", 8: "ok", 16: "ok"}


def test_one_line_keeps_the_mismatch_summary() -> None:
    err = AssertionError("\nNot equal to tolerance rtol=1e-05\nwhat\nMismatched elements: 3 / 64 (4.69%)\n"
                         "Max absolute difference among violations: 1.5\n x: array([...])")
    assert one_line(err) == ("AssertionError: Mismatched elements: 3 / 64 (4.69%); "
                             "Max absolute difference among violations: 1.5")


def test_one_line_of_a_message_of_nul_bytes_says_there_was_none() -> None:
    assert one_line(RuntimeError("\0")) == "RuntimeError: (no message)"


def test_refusal_is_the_one_line_or_none() -> None:
    from tirbench.core.errors import refusal

    assert refusal(lambda: gemm(0, 64, 64)) == "m must be a positive integer, got 0"
    assert refusal(lambda: GOOD.apply(gemm(64, 64, 64), {"factor": 5})) == "factor=5 does not divide k=64"
    assert refusal(lambda: GOOD.apply(gemm(64, 64, 64, dtype="float16"))).startswith("good does not take gemm")
    assert refusal(lambda: gemm(64, 64, 64)) is None
