"""Shared fixtures: the tests run on a CPU machine (numerics on llvm, CUDA compiled for sm_90a, not run)."""
import numpy as np
import pytest


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
