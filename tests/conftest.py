"""Shared fixtures: the tests run on a CPU machine (numerics on llvm, CUDA compiled for sm_90a, not run)."""
import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
