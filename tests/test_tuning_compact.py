"""compact_database: the records MetaSchedule writes, with the index maps their traces embed re-encoded without
indentation, read back as the same records (same count, order, run times, and the same best schedule)."""
import shutil
from pathlib import Path

import pytest

from tirbench.tuning.database import best_schedule, compact_database, open_database
from tirbench.tuning.history import trials_done, tuning_history
from tirbench.tuning.tune import work_dir_for
from tirbench.workloads import gemm

ROOT = Path(__file__).resolve().parents[1]
WL = gemm(1024, 1024, 1024)
RECORDED = work_dir_for(ROOT, WL, "v5")   # its traces carry TransformLayout index maps
pytestmark = pytest.mark.skipif(trials_done(RECORDED) == 0, reason="no recorded v5-space tuning database")


def test_compacted_database_reads_back_the_same_records_and_best_schedule(tmp_path):
    work_dir = tmp_path / "db"
    shutil.copytree(RECORDED, work_dir, ignore=shutil.ignore_patterns("logs"))
    path = work_dir / "database_tuning_record.json"
    size = path.stat().st_size
    history = tuning_history(work_dir, WL.flops)
    script = best_schedule(open_database(work_dir), WL).mod.script()
    saved = compact_database(work_dir)
    assert saved > 0 and path.stat().st_size == size - saved
    assert "\\n" not in path.read_text()   # no indented JSON left inside the records
    assert trials_done(work_dir) == trials_done(RECORDED)
    assert tuning_history(work_dir, WL.flops).equals(history)
    assert best_schedule(open_database(work_dir), WL).mod.script() == script
    assert compact_database(work_dir) == 0   # already compact: not rewritten
