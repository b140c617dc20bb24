"""A tuned row says whether its best record is a hand seed: the ``rules`` space's database of a small layer, its seeds
and one record the search found committed with chosen run times; ``seed_labels`` / ``with_tuned_best`` label rows
recorded without the column, ``replay`` labels its own, and ``search_best`` finds the fastest record that is no
seed's, in the archive where the records kept in git are all seeds'. And the two recorded rows the review found."""
from pathlib import Path

import pandas as pd
import pytest
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms

from test_results import row

from tirbench.bench.results import append_rows, read_results
from tirbench.core.machine import cuda_target
from tirbench.core.paths import project_root
from tirbench.schedules.common.decisions import with_decisions
from tirbench.schedules.conv.direct import conv2d_nchw_splitk_space
from tirbench.tuning.archive import pack, trim_database
from tirbench.tuning.database import open_database
from tirbench.tuning.labels import database_label, seed_labels, space_of_variant, with_tuned_best
from tirbench.tuning.replay import replay, search_best
from tirbench.tuning.seeds import is_seed, sampled_decisions
from tirbench.tuning.spaces import get_space, rules_seeds
from tirbench.tuning.tune import work_dir_for
from tirbench.workloads import conv2d

WL = conv2d(1, 64, 56, 56, 64, 3, 3, 1, 1)
SHAPE = WL.shape
RULES = get_space("rules")


def search_schedule() -> s_tir.Schedule:
    """A schedule of the rules space whose tiles are no seed's: the first seed's tilings, each reversed."""
    seeds = rules_seeds(WL)
    tiles = [d[::-1] for d in sampled_decisions(seeds[0]) if isinstance(d, list)]
    sch = with_decisions(WL, conv2d_nchw_splitk_space(s_tir.Schedule(WL.mod)), tiles)
    assert all(sampled_decisions(sch) != sampled_decisions(s) for s in seeds)
    return sch


def commit(work_dir: Path, schedules_and_ms: list[tuple[s_tir.Schedule, float]]) -> None:
    db = open_database(work_dir)
    workload = db.commit_workload(WL.mod)
    args = ms.arg_info.ArgInfo.from_prim_func(WL.mod["main"])
    for sch, t_ms in schedules_and_ms:
        db.commit_tuning_record(ms.database.TuningRecord(sch.trace, workload, [t_ms * 1e-3], RULES.target(), args))


def make_root(tmp_path: Path, seed_ms: float, search_ms: float) -> Path:
    """A project root: the rules database of ``WL`` (its seeds at ``seed_ms`` and more, one search record at
    ``search_ms``) and notebook 08's rows of it, recorded before the ``tuned_best`` column (empty)."""
    root = tmp_path / "root"
    seeds = rules_seeds(WL)
    commit(work_dir_for(root, WL, RULES), [(s, seed_ms + i) for i, s in enumerate(seeds)]
           + [(search_schedule(), search_ms)])
    trials = len(seeds) + 1
    append_rows(root / "results" / "08_resnet50" / "results.csv", [
        row(notebook="08_resnet50", workload="conv2d", shape=SHAPE, variant="metaschedule_rules",
            provider="metaschedule", trials=trials),
        row(run_id="r0", timestamp="2026-11-20T00:00:00+00:00", notebook="08_resnet50", workload="conv2d",
            shape=SHAPE, variant="metaschedule_rules", provider="metaschedule", trials=trials - 1),
        row(notebook="08_resnet50", workload="conv2d", shape=SHAPE, variant="nchw_metaschedule",
            provider="metaschedule", trials=3),
        row(notebook="08_resnet50", workload="conv2d", shape=SHAPE, variant="rules", trials=0)])
    return root


@pytest.mark.parametrize("variant, space", [
    ("metaschedule_wgmma_space_float16", "wgmma"), ("nhwc_wgmma_ms", "wgmma"), ("nhwc_wmma_ms", "wmma"),
    ("metaschedule_rules", "rules"), ("metaschedule_v5_space_float32", "v5"), ("nchw_splitk_ms", "splitk"),
    ("nchw_template_ms", "template"), ("nhwc_metaschedule", "default"), ("metaschedule_float16", "default"),
    ("nhwc_wgmma_ms_search_best", "wgmma")])
def test_a_tuned_variant_names_its_space(variant, space):
    assert space_of_variant(variant).name == space


def test_a_seed_is_recognised_and_a_search_record_is_not():
    seeds = rules_seeds(WL)
    assert all(is_seed(RULES, WL, s) for s in seeds) and not is_seed(RULES, WL, search_schedule())
    assert not is_seed(get_space("default"), WL, seeds[0])   # a space without seeds has none


@pytest.mark.parametrize("seed_ms, search_ms, label", [(1.0, 5.0, "seed"), (1.0, 0.5, "search")])
def test_rows_recorded_without_the_column_are_labelled_from_the_database(tmp_path, seed_ms, search_ms, label):
    root = make_root(tmp_path, seed_ms, search_ms)
    key = ("08_resnet50", "metaschedule_rules", SHAPE, "float32")
    assert seed_labels(root) == {key: label, ("08_resnet50", "nchw_metaschedule", SHAPE, "float32"): "search"}
    df = with_tuned_best(read_results(root / "results" / "08_resnet50" / "results.csv"), root)
    assert list(df["tuned_best"]) == [label, "", "search", ""]   # the older run had other trials: not known


def test_a_database_tuned_further_since_the_row_leaves_it_unknown(tmp_path):
    root = make_root(tmp_path, 1.0, 5.0)
    assert database_label(root, "conv2d", SHAPE, "float32", "metaschedule_rules", 99) is None


def test_a_recorded_label_wins_over_the_database(tmp_path):
    root = make_root(tmp_path, 1.0, 5.0)
    csv = root / "results" / "08_resnet50" / "results.csv"
    append_rows(csv, [row(run_id="r9", timestamp="2026-11-29T00:00:00+00:00", notebook="08_resnet50",
                          workload="conv2d", shape=SHAPE, variant="metaschedule_rules_search_best",
                          provider="metaschedule", trials=3, tuned_best="search")])
    assert seed_labels(root)[("08_resnet50", "metaschedule_rules_search_best", SHAPE, "float32")] == "search"


def test_replay_labels_its_best_and_search_best_finds_the_search_record_in_the_archive(tmp_path, capsys):
    """Trimmed to the fastest record (a seed), the database in git has no search record: ``search_best`` reads the
    archive's full copy."""
    root = make_root(tmp_path, 1.0, 5.0)
    work_dir = work_dir_for(root, WL, RULES)
    pack(root)
    assert trim_database(work_dir, keep=1) > 0
    r = replay(WL, "rules", variant="metaschedule_rules", root=root, target=cuda_target())
    assert r.tuned_best == "seed" and "its best is a seed" in capsys.readouterr().out
    assert search_best(r, root=root, target=cuda_target()) is None   # no GPU: found and said, not timed
    assert capsys.readouterr().out == ("metaschedule_rules_search_best: the search's fastest kernel that is no "
                                       "seed, 5.0000 ms as the tuner measured it\n")


def test_search_best_of_a_replay_whose_best_is_the_search_is_that_replay(tmp_path, capsys):
    root = make_root(tmp_path, 1.0, 0.5)
    r = replay(WL, "rules", variant="metaschedule_rules", root=root, target=cuda_target())
    assert r.tuned_best == "search" and search_best(r, root=root, target=cuda_target()) is None
    assert capsys.readouterr().out.endswith("metaschedule_rules_search_best: none apart from metaschedule_rules, "
                                            "whose best is the search's own\n")


def test_the_recorded_wgmma_rows_the_review_found_replay_a_seed():
    """Notebook 03's ``metaschedule_wgmma_space_float16`` (v9's defaults, re-measured at trial 215) and notebook 06's
    ``nhwc_wgmma_ms`` (trial 7, the first NHWC_TMA_WS seed): as long as their 256-trial databases are the ones
    recorded, their best is a seed's kernel."""
    root = project_root()
    df = pd.concat([read_results(root / "results" / nb / "results.csv") for nb in ("03_gemm", "06_conv2d_tensorcore")])
    rows = df[df["variant"].isin(["metaschedule_wgmma_space_float16", "nhwc_wgmma_ms"])]
    latest = rows.sort_values("timestamp").drop_duplicates("variant", keep="last")
    labels = [database_label(root, r.workload, r.shape, r.dtype, r.variant, int(r.trials)) for r in latest.itertuples()]
    assert len(labels) == 2 and labels == ["seed", "seed"]
