"""The report index and the reports it links, opened in headless Chromium (Debian's ``chromium``; headless, no
sandbox, a fresh profile): every image loads, every link from the index resolves, no report shows a Python
traceback. Skipped, with the reason, where no Chromium is installed (``.ci/run`` installs it)."""
import shutil
from pathlib import Path

import pytest
from chromium import Chromium, check_reports, find_chromium

from tirbench.report.index import write_index

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "results" / "reports"
pytestmark = pytest.mark.skipif(find_chromium() is None,
                                reason="no chromium on PATH: `apt-get install chromium` (.ci/run does) to run it")


@pytest.fixture(scope="module")
def browser():
    with Chromium() as c:
        yield c


def test_index_of_the_recorded_reports_and_plots(browser, tmp_path):
    """An index written for the committed reports and plots (copied, so nothing under results/ is written)."""
    out = tmp_path / "results"
    shutil.copytree(RECORDED, out / "reports", ignore=shutil.ignore_patterns("index.html"))
    for plots in (ROOT / "results").glob("[0-9]*_*/"):
        shutil.copytree(plots, out / plots.name, ignore=shutil.ignore_patterns("*.csv"))
    pages = check_reports(browser, write_index(out, ROOT))
    assert {p.stem for p in pages} == {p.stem for p in RECORDED.glob("*.html") if p.stem != "index"}


def test_committed_index(browser):
    if not (RECORDED / "index.html").exists():
        pytest.skip("no results/reports/index.html committed yet: `make run-all` on a GPU writes it")
    check_reports(browser, RECORDED / "index.html")


def test_a_broken_image_and_a_traceback_are_caught(browser, tmp_path):
    (tmp_path / "report.html").write_text("<p>Traceback (most recent call last):</p>")
    (tmp_path / "index.html").write_text('<img src="missing.png"><a href="report.html">r</a>')
    with pytest.raises(AssertionError, match="images that do not load"):
        check_reports(browser, tmp_path / "index.html")
    (tmp_path / "index.html").write_text('<a href="report.html">r</a>')
    with pytest.raises(AssertionError, match="report.html shows a Python traceback"):
        check_reports(browser, tmp_path / "index.html")
    (tmp_path / "index.html").write_text('<a href="gone.html">r</a>')
    with pytest.raises(AssertionError, match="does not resolve"):
        check_reports(browser, tmp_path / "index.html")
