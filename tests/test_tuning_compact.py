"""compact_database: the records MetaSchedule writes, with the index maps their traces embed re-encoded without
indentation, and the workload file with its module's JSON re-encoded likewise, read back as the same records (same
count, order, run times, and the same best schedule, which also finds its workload by the module)."""
import base64
import json
import shutil
import struct
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


def _indented(value: object) -> object:
    """A decoded record with each embedded JSON object written indented, as MetaSchedule writes it."""
    if isinstance(value, list):
        return [_indented(v) for v in value]
    if isinstance(value, str) and value.startswith("{"):
        return json.dumps(json.loads(value), indent=2)
    return value


def _as_metaschedule_writes_it(work_dir: Path) -> None:
    """Rewrite a (committed, compacted) database the way MetaSchedule writes one: embedded JSON indented."""
    records = work_dir / "database_tuning_record.json"
    lines = records.read_text().splitlines()
    records.write_text("".join(json.dumps(_indented(json.loads(line))) + "\n" for line in lines))
    workload = work_dir / "database_workload.json"
    shash, blob = json.loads(workload.read_text())
    raw = base64.b64decode(blob)
    text = json.dumps(json.loads(raw[8:]), indent=2).encode()
    workload.write_text(json.dumps([shash, base64.b64encode(struct.pack("<Q", len(text)) + text).decode()]) + "\n")


def test_compacted_database_reads_back_the_same_records_and_best_schedule(tmp_path):
    work_dir = tmp_path / "db"
    shutil.copytree(RECORDED, work_dir, ignore=shutil.ignore_patterns("logs"))
    _as_metaschedule_writes_it(work_dir)
    path, workload = work_dir / "database_tuning_record.json", work_dir / "database_workload.json"
    size, workload_size = path.stat().st_size, workload.stat().st_size
    history = tuning_history(work_dir, WL.flops)
    script = best_schedule(open_database(work_dir), WL).mod.script()
    saved = compact_database(work_dir)
    assert saved > 0 and path.stat().st_size + workload.stat().st_size == size + workload_size - saved
    assert workload.stat().st_size < 0.6 * workload_size
    assert "\\n" not in path.read_text()   # no indented JSON left inside the records
    assert trials_done(work_dir) == trials_done(RECORDED)
    assert tuning_history(work_dir, WL.flops).equals(history)
    assert best_schedule(open_database(work_dir), WL).mod.script() == script
    assert compact_database(work_dir) == 0   # already compact: not rewritten
