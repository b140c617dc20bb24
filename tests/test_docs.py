"""docs/: every run a page cites is still in a recorded CSV (a number is quoted with its run), and every relative link
of the pages and of the README resolves."""
import csv
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md"))
RUN_ID = re.compile(r"\b\d{8}T\d{6}Z-[0-9a-f]{6}\b")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def recorded_runs() -> set[str]:
    """Every ``run_id`` of every CSV under results/ (results, Winograd errors, tuning throughput)."""
    runs = set()
    for path in (ROOT / "results").rglob("*.csv"):
        with path.open(newline="") as f:
            runs.update(row["run_id"] for row in csv.DictReader(f) if row.get("run_id"))
    return runs


def test_docs_has_its_pages():
    assert {p.name for p in PAGES} >= {"README.md", "gemm.md", "conv.md", "int8.md", "tuning.md"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_cited_run_is_recorded(page):
    missing = sorted(set(RUN_ID.findall(page.read_text())) - recorded_runs())
    assert not missing, f"{page.name} cites runs no results CSV holds any more: {missing}"


@pytest.mark.parametrize("page", [*PAGES, ROOT / "README.md"], ids=lambda p: p.name)
def test_relative_links_resolve(page):
    targets = [t for t in LINK.findall(page.read_text()) if "://" not in t and not t.startswith("mailto:")]
    broken = [t for t in targets if not (page.parent / t).exists()]
    assert not broken, f"{page.relative_to(ROOT)} links to missing files: {broken}"
