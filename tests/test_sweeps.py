"""The sample `make test` takes of the sweeps (``conftest.SWEEPS``) names real parametrized tests."""
from pathlib import Path

from conftest import SWEEPS

TESTS = Path(__file__).parent


def test_every_sweep_names_a_parametrized_test_of_its_file():
    for name in SWEEPS:
        file, function = name.split("::")
        text = (TESTS / file).read_text()
        at = text.find(f"\ndef {function}(")
        decorators = text[text.rfind("\n\n", 0, at):at]
        assert at >= 0 and "@pytest.mark.parametrize" in decorators, f"{name}: no parametrized test of that name"
