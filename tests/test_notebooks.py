"""Every numbered notebook executes end to end in quick mode (papermill, no result files written)."""
from pathlib import Path

import papermill as pm
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_in_quick_mode(nb, tmp_path):
    out = tmp_path / nb.name
    pm.execute_notebook(str(nb), str(out), parameters={"quick": True, "save": False}, cwd=str(nb.parent),
                        kernel_name="python3", progress_bar=False)
    assert out.exists()


def test_notebooks_are_stored_without_outputs():
    import nbformat

    for nb in NOTEBOOKS:
        cells = nbformat.read(nb, as_version=4).cells
        assert not any(c.get("outputs") for c in cells if c.cell_type == "code"), nb.name
        tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, f"{nb.name}: exactly one cell tagged 'parameters'"
