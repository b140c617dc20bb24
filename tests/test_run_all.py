"""``make run-all`` (tirbench.report.run_all): a parameter no selected notebook declares stops it before anything runs;
a notebook's rows, figures, executed copy and report move into place together, only when it ran to its end; its
kernels run without the TCP warning; the reports share their stylesheet and embed palette PNGs."""
import base64
import io
import os
import re
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from matplotlib.figure import Figure
from PIL import Image
from test_results import row

from tirbench.bench import results
from tirbench.report import run_all
from tirbench.report.compact import compact_notebook

ROOT = Path(__file__).resolve().parents[1]
NB04 = ROOT / "notebooks" / "04_conv2d.ipynb"
NB05 = ROOT / "notebooks" / "05_conv2d_batch1.ipynb"   # declares tune_now


@pytest.fixture
def no_run(monkeypatch):
    """run_all.run_all replaced: records that it was called instead of running anything."""
    calls = []
    monkeypatch.setattr(run_all, "run_all", lambda notebooks, params, root: calls.append(params) or [])
    return calls


@pytest.mark.parametrize("name, value, hint", [("repeat", "5", " (did you mean 'repeats'?)"), ("layout", "NCWH", "")])
def test_a_parameter_no_notebook_declares_stops_before_anything_runs(name, value, hint, no_run, capsys):
    assert run_all.main(["-p", "quick", "True", "-p", name, value, str(NB04)]) == 2
    out = capsys.readouterr()
    assert out.err == (f"run-all: unknown parameter '{name}'{hint}: no selected notebook (04_conv2d) declares it; "
                       f"nothing was run\n")
    assert no_run == []


@pytest.mark.skipif(run_all.has_cuda_gpu(), reason="checks the no-GPU behaviour")
def test_tune_now_without_a_gpu_says_nothing_will_be_tuned(no_run, capsys):
    assert run_all.main(["-p", "tune_now", "True", str(NB05)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == ("[run-all] tune_now=True, but no CUDA GPU here: nothing will "
                                                       "be tuned (the notebooks replay the recorded databases)")
    assert no_run == [{"tune_now": True}]


def test_a_notebook_that_does_not_exist_is_one_line_listing_those_that_do(no_run, capsys):
    assert run_all.main(["notebooks/99_nope.ipynb"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and no_run == []
    assert err.startswith("run-all: no notebook notebooks/99_nope.ipynb; the notebooks are (in notebooks/): "
                          "00_overview.ipynb, 01_vector_add.ipynb, ")
    assert "09_relax_models.ipynb, 10_networks.ipynb; nothing was run" in err


@pytest.mark.parametrize("argv, message", [
    (["-p", "repeats", str(NB04)], f"`-p repeats` needs a value (-p NAME VALUE, e.g. -p repeats 20); {NB04} is a "
                                   "notebook, not a value; nothing was run"),
    (["-p", "repeats"], "`-p repeats` needs a value (-p NAME VALUE, e.g. -p repeats 20); nothing was run"),
    (["-p", "repeats", "-p", "seed", "1"], "`-p repeats` needs a value"),
    (["-p"], "-p needs a name and a value"),
    (["--parameter", str(NB04)], "--parameter needs a name and a value"),
    (["-p", "sizes", "[1,", str(NB04)], "-p sizes '[1,' is not a YAML value"),
    (["--bogus", str(NB04)], "unrecognized arguments: --bogus (usage: run_all [-p NAME VALUE]... [NOTEBOOK...])"),
])
def test_a_bad_command_line_is_one_line_and_runs_nothing(argv, message, no_run, capsys):
    assert run_all.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("run-all: ") and message in err and err.count("\n") == 1
    assert no_run == []


def test_a_negative_value_is_a_value(no_run):
    assert run_all.main(["-p", "seed", "-1", str(NB04)]) == 0 and no_run == [{"seed": -1}]


def synthetic_notebook(path: Path, fail: bool) -> None:
    """A notebook that commits a fake GPU run's rows, saves a figure, then (``fail``) fails in its last cell."""
    rows = [row(run_id="new", notebook=path.stem, variant=f"v{i}") for i in range(2)]
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell("fail = False\npart = \"all\"")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(
        "import matplotlib.pyplot as plt\n"
        "from tirbench.bench.plots import save_figure\n"
        "from tirbench.bench.session import Session\n"
        f"session = Session({path.stem!r})\n"
        f"session.gpu, session.rows = True, lambda: {rows!r}   # a GPU run, faked\n"
        "session.commit()\n"
        "fig, ax = plt.subplots()\n"
        "ax.plot([1, 2, 3])\n"
        "save_figure(fig, session.figure_path('plot.png'))"),
        nbformat.v4.new_code_cell(f"if {fail}:\n    raise RuntimeError('the last cell fails')")]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def test_rows_figures_executed_copy_and_report_move_in_only_when_the_notebook_succeeds(tmp_path, monkeypatch,
                                                                                         capfd):
    root = tmp_path
    (root / "pyproject.toml").write_text("")
    ok, failing = root / "notebooks" / "98_ok.ipynb", root / "notebooks" / "99_fails.ipynb"
    synthetic_notebook(ok, fail=False)
    synthetic_notebook(failing, fail=True)
    superseded = root / "results" / "98_ok" / "results.csv"   # two older runs of v0: the oldest goes, the other stays
    results.append_rows(superseded, [row(run_id=f"older{i}", notebook="98_ok", variant="v0",
                                         timestamp=f"2026-11-2{i}T00:00:00+00:00") for i in (1, 2)])
    old_rows = root / "results" / "99_fails" / "results.csv"
    results.append_rows(old_rows, [row(run_id="old", notebook="99_fails")])
    before = old_rows.read_bytes()
    out = run_all.output_dir(root)
    for path in (out / "executed" / failing.name, out / "reports" / "99_fails.html"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("an earlier run")
    monkeypatch.chdir(root)
    monkeypatch.delenv("TIRBENCH_ROOT", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")   # run_all sets it for its kernels: restored afterwards
    assert run_all.main([str(ok), str(failing)]) == 1
    log = capfd.readouterr()
    assert old_rows.read_bytes() == before   # the failing notebook: nothing moved in
    assert not (out / "99_fails" / "plot.png").exists()
    assert (out / "executed" / failing.name).read_text() == "an earlier run"
    assert (out / "reports" / "99_fails.html").read_text() == "an earlier run"
    staged = root / "build" / "run-all" / "99_fails" / "staged" / "99_fails"
    assert {p.name for p in staged.iterdir()} == {"results.csv", "plot.png"}   # kept, to read
    assert f"what it staged is in {staged.parent}" in log.out
    new_rows = results.read_results(root / "results" / "98_ok" / "results.csv")   # the one that succeeded
    assert list(new_rows["run_id"]) == ["older2", "new", "new"] and new_rows["verified"].all()
    assert list(new_rows["variant"]) == ["v0", "v0", "v1"]
    assert (out / "98_ok" / "plot.png").exists() and (out / "executed" / ok.name).exists()
    assert (out / "reports" / "98_ok.html").exists()
    assert ("98_ok: moved in 2 rows (results/98_ok/results.csv; 1 older row measured again since dropped, git history "
            "keeps them), 1 figure, the executed copy and the report") in log.out
    assert not (root / "build" / "run-all" / "98_ok").exists()
    assert "without encryption" not in log.out + log.err   # the kernels ran over IPC


def test_reports_share_one_stylesheet_and_embed_palette_pngs(tmp_path):
    nb = nbformat.v4.new_notebook()
    fig = Figure(figsize=(9, 5))
    ax = fig.subplots()
    for i in range(4):
        ax.plot(range(10), [v ** (1 + i / 4) for v in range(10)], marker="o", label=f"line {i}")
    ax.legend()
    png = io.BytesIO()
    fig.savefig(png, format="png")
    nb.cells = [nbformat.v4.new_code_cell("plot()", outputs=[nbformat.v4.new_output(
        "display_data", data={"image/png": base64.b64encode(png.getvalue()).decode(), "text/plain": "<Figure>"})])]
    executed = tmp_path / "a.ipynb"
    nbformat.write(nb, executed)
    compact_notebook(executed)
    data = nbformat.read(executed, as_version=4).cells[0].outputs[0].data["image/png"]
    assert Image.open(io.BytesIO(base64.b64decode(data))).mode == "P"
    reports = tmp_path / "reports"
    body = run_all.render_report(executed, reports)
    head = body[:body.index("</head>")]
    assert "<style" not in head and '<link href="report.css" rel="stylesheet"/>' in head
    assert 10_000 < (reports / "report.css").stat().st_size < 40_000 and len(body) < 30_000
    assert len(re.findall("data:image/png", body)) == 1
    assert os.path.getsize(executed) < len(png.getvalue()) * 4 / 3


def test_a_partial_run_moves_its_rows_in_and_keeps_the_published_copies(tmp_path, monkeypatch, capfd):
    """On a GPU run (``results/`` is where copies go): ``part`` differs from the notebook's default, so the run's rows
    are appended but the executed copy, report and figure stay those of the last full run."""
    root = tmp_path
    (root / "pyproject.toml").write_text("")
    nb = root / "notebooks" / "97_part.ipynb"
    synthetic_notebook(nb, fail=False)
    out = root / "results"
    published = [out / "executed" / nb.name, out / "reports" / "97_part.html", out / "97_part" / "plot.png"]
    for path in published:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("the last full run")
    monkeypatch.setattr(run_all, "output_dir", lambda root: root / "results")
    monkeypatch.chdir(root)
    monkeypatch.delenv("TIRBENCH_ROOT", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    assert run_all.main(["-p", "part", "some", "-p", "fail", "False", str(nb)]) == 0
    log = capfd.readouterr().out
    assert [p.read_text() for p in published] == ["the last full run"] * 3
    assert list(results.read_results(out / "97_part" / "results.csv")["run_id"]) == ["new", "new"]
    scratch = root / "build" / "run-all"
    assert (f"[run-all] 97_part: a partial run (part='some' (default 'all')): the published executed copy, report and "
            f"figures in {out} were kept (the last full run's); this run's executed copy is {scratch / nb.name}\n"
            in log)
    assert "97_part: moved in 2 rows (results/97_part/results.csv)\n" in log
    assert (scratch / nb.name).exists() and not (scratch / "97_part" / "staged").exists()


def test_a_run_is_partial_only_where_it_publishes_and_a_parameter_narrows_it(tmp_path):
    nb = tmp_path / "notebooks" / "97_part.ipynb"
    synthetic_notebook(nb, fail=False)
    results_dir, cpu_run = tmp_path / "results", tmp_path / "build" / "cpu-run"
    assert run_all.kept_because(nb, {"part": "all", "fail": False}, results_dir, tmp_path) is None
    assert run_all.kept_because(nb, {"part": "x"}, cpu_run, tmp_path) is None   # a CPU run writes every copy
    assert run_all.kept_because(nb, {"part": "x"}, results_dir, tmp_path) == "a partial run (part='x' (default 'all'))"


def test_a_run_built_for_an_older_arch_than_the_gpus_keeps_the_published_copies(tmp_path, monkeypatch):
    nb = tmp_path / "notebooks" / "97_part.ipynb"
    synthetic_notebook(nb, fail=False)
    results_dir = tmp_path / "results"
    monkeypatch.setattr(run_all, "builds_ptx", lambda arch: arch != "sm_90a")   # an H100 as the device
    monkeypatch.setattr(run_all, "current_gpu", lambda: SimpleNamespace(arch="sm_80"))   # TIRBENCH_ARCH=sm_80
    assert run_all.kept_because(nb, {"part": "all"}, results_dir, tmp_path) == (
        "a run built for sm_80, an older architecture than this GPU's (PTX)")
    assert run_all.ptx_build({"target": "nvidia/nvidia-t4"}) == "sm_75"
    assert run_all.ptx_build({"target": "nvidia/nvidia-h100"}) is None
    monkeypatch.setattr(run_all, "current_gpu", lambda: SimpleNamespace(arch="sm_90a"))
    assert run_all.kept_because(nb, {"part": "all"}, results_dir, tmp_path) is None
