"""Shared fixtures: the tests run on a CPU machine (numerics on llvm, CUDA compiled for sm_90a, not run).

Two tiers. `make test` (what CI runs) takes a sample of the sweeps: of each test in ``SWEEPS`` (one case per
candidate, layer, shape or architecture; together more than half the suite's time), ``SWEEP_CASES`` cases spread
evenly over its parametrization, the first always; and it leaves out the tests marked ``full``. `make test-full`
(``pytest --full``) runs every case of everything."""
import math
from collections import defaultdict

import numpy as np
import pytest

#: Parametrized tests that sweep every candidate, layer, shape or architecture (``file::function``).
SWEEPS = frozenset({
    "test_any_shape.py::test_every_access_of_a_b_c_is_proven_in_bounds",
    "test_any_shape.py::test_notebook_padded_candidates_build_and_divide_the_nearest_divisible_shape",
    "test_any_shape.py::test_padded_stores_stay_inside_c",
    "test_any_shape.py::test_rung_builds_for_sm90a_at_odd_sizes",
    "test_any_shape.py::test_simt_rungs_match_numpy_on_llvm",
    "test_any_shape.py::test_vector_accesses_fit_the_row_alignment",
    "test_arch_filter.py::test_notebook_08s_rules_give_every_resnet50_layer_a_kernel_the_arch_builds",
    "test_blackwell_build.py::test_a_family_blackwell_offers_builds_for_it_and_compiles_with_nvcc",
    "test_conv_any_channels.py::test_any_channels_build_for_sm90a_and_stay_in_bounds",
    "test_conv_depthwise_grouped.py::test_nvcc_takes_every_candidate_without_spills",
    "test_conv_simt_gemm.py::test_candidate_builds_for_sm90a_and_stays_in_bounds",
    "test_conv_simt_gemm.py::test_nvcc_takes_every_candidate_without_spills",
    "test_conv_simt_gemm.py::test_scheduled_arithmetic_matches_numpy_on_llvm",
    "test_conv_tma_ws.py::test_int8_cuda_is_byte_identical_to_the_recorded",
    "test_conv_tma_ws.py::test_no_spills_with_nvcc",
    "test_cuda_identity.py::test_generated_cuda_unchanged",
    "test_gemm_rules.py::test_few_rows_are_offered_split_k_whose_slices_fill_the_sms",
    "test_gemm_rules.py::test_tiles_of_192_columns_come_first_where_they_fill_the_waves",
    "test_gemm_rules.py::test_v9_takes_shapes_its_tiles_do_not_divide_with_the_tma_store",
    "test_gemm_schedules.py::test_rung_has_no_spills",
    "test_gemm_schedules.py::test_v9_at_shapes_its_tiles_do_not_divide_leaves_the_edges_to_tma",
    "test_gemm_splitk.py::test_fp32_split_k_matches_numpy_on_llvm_and_stores_only_inside_c",
    "test_networks.py::test_every_layer_builds_its_workload",
    "test_record_needs.py::test_a_family_needs_exactly_the_features_its_cuda_uses",
    "test_turing_simt.py::test_built_for_sm_75_without_cp_async_and_nvcc_compiles_it_without_spills",
    "test_wgmma_space.py::test_each_seed_is_its_hand_candidate_built_with_wgmma",
    "test_wgmma_space.py::test_metaschedule_searches_the_space_from_its_seeds",
    "test_winograd.py::test_layers_build_for_sm90a_and_nvcc_takes_them",
})
#: Cases of each sweep `make test` runs.
SWEEP_CASES = 2


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full", action="store_true", default=False,
                     help="every case of the sweeps and the tests marked full (make test-full)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "full: a slow test only `make test-full` (pytest --full) runs")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without ``--full``: the tests marked ``full`` and all but ``SWEEP_CASES`` evenly spread cases of each sweep
    deselected (reported as such)."""
    if config.getoption("--full"):
        return
    cases: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        cases[f"{item.path.name}::{item.originalname}"].append(item)
    drop = {id(item) for item in items if item.get_closest_marker("full")}
    for name in SWEEPS & cases.keys():
        stride = max(1, math.ceil(len(cases[name]) / SWEEP_CASES))
        drop |= {id(item) for i, item in enumerate(cases[name]) if i % stride}
    if drop:
        config.hook.pytest_deselected(items=[item for item in items if id(item) in drop])
        items[:] = [item for item in items if id(item) not in drop]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _metaschedule_logger_without_pytest_handlers():
    """MetaSchedule builds its logging config from the names of its logger's handlers; pytest attaches its unnamed
    capture handlers to every logger that does not propagate (MetaSchedule's, after a first tuning run) when a test
    phase starts, and a second tuning run in the process fails ("'NoneType' object has no attribute 'format'").
    A propagating logger gets none: MetaSchedule turns propagation off again when it configures its logging."""
    import logging

    logger = logging.getLogger("tvm.s_tir.meta_schedule")
    for handler in [h for h in logger.handlers if h.get_name() is None]:
        logger.removeHandler(handler)
    logger.propagate = True
    yield
