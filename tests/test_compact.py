"""Executed notebooks are compacted before they are kept (``tirbench.report.compact``): progress bars keep only the
line a terminal would end on, TVMScript keeps its colours through classes, a pandas table its tags and text, and each
takes far fewer bytes; papermill's record of a cell keeps its duration; compacting twice changes nothing."""
import base64
import io
import re
import sys

import nbformat
import pandas as pd
import pytest
from matplotlib.figure import Figure

from tirbench.report.compact import SCRIPT_CLASS, compact_notebook, script_classes, table_spaces


def stream(name: str, text: str):
    return nbformat.v4.new_output("stream", name=name, text=text)


def test_progress_lines_keep_their_last_state_and_other_streams_stay_apart(tmp_path):
    bars = [stream("stderr", f"\rsweep: {i}/4 best {i}.0") for i in range(5)] + [stream("stderr", "\n")]
    outputs = [stream("stdout", "ok v0\n"), *bars, stream("stdout", "ok v1\n")]
    path = tmp_path / "a.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("sweep()", outputs=outputs)]), path)
    compact_notebook(path)
    got = [(o.name, o.text) for o in nbformat.read(path, as_version=4).cells[0].outputs]
    assert got == [("stdout", "ok v0\n"), ("stderr", "sweep: 4/4 best 4.0\n"), ("stdout", "ok v1\n")]


def test_tvmscript_html_gets_classes_and_keeps_every_colour(monkeypatch):
    pytest.importorskip("pygments")
    from IPython import display
    from tvm.script import highlight
    from tvm.script import ir as I
    from tvm.script import tirx as T

    @I.ir_module
    class Module:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
            for i in range(8):
                with T.sblock("b"):
                    vi = T.axis.spatial(8, i)
                    B[vi] = A[vi] + T.float32(1)

    shown = []
    monkeypatch.setitem(sys.modules, "ipykernel", sys)   # cprint draws HTML only inside a kernel
    monkeypatch.setattr(display, "display", lambda obj: shown.append(obj.data))
    highlight.cprint(Module.script())
    html = shown[0]
    assert 'style="color' in html
    out = script_classes(html)
    styles = dict(re.findall(rf"\.{SCRIPT_CLASS} \.(\w+)\{{([^}}]*)\}}", out))
    inline = re.findall(r'<span style="([^"]*)">', html)
    classes = re.findall(r'<span class="(\w+)">', out)
    assert [styles[c] for c in classes] == inline   # the same colour on every token
    assert re.sub(r"<[^>]+>", "", html) == re.sub(r"<style>.*?</style>|<[^>]+>", "", out)   # the same text
    assert len(out) < 0.8 * len(html)


def test_other_html_is_left_alone():
    table = "<div><style scoped>.dataframe td {color: red}</style><table></table></div>"
    assert script_classes(table) == table


def test_an_output_with_html_keeps_no_plain_text_copy_and_plain_text_alone_stays(tmp_path):
    table = nbformat.v4.new_output("execute_result", data={"text/html": "<table></table>", "text/plain": "a b"})
    plain = nbformat.v4.new_output("execute_result", data={"text/plain": "a b"})
    path = tmp_path / "a.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("df", outputs=[table, plain])]), path)
    compact_notebook(path)
    got = [dict(o.data) for o in nbformat.read(path, as_version=4).cells[0].outputs]
    assert got == [{"text/html": "<table></table>"}, {"text/plain": "a b"}]


def test_a_pandas_table_loses_the_spaces_between_its_tags_and_shows_the_same():
    html = pd.DataFrame({"variant": ["v0 tiled", "v1"], "GB/s": [1227.0, 2035.5]})._repr_html_()
    out = table_spaces(html)
    assert "\n" not in out and len(out) < 0.8 * len(html)
    assert re.findall(r"<[^>]+>", out) == re.findall(r"<[^>]+>", html)   # the same tags, in order
    assert re.sub(r"<[^>]+>", " ", out).split() == re.sub(r"<[^>]+>", " ", html).split()   # the same text
    assert "<td>v0 tiled</td>" in out and table_spaces(out) == out
    other = "<div>\n<b>a</b> <i>b</i>\n</div>"
    assert table_spaces(other) == other


def test_papermill_keeps_each_cells_duration_and_compacting_twice_changes_nothing(tmp_path):
    fig = Figure(figsize=(3, 2))
    fig.subplots().plot([0, 1, 2], [1, 0, 2])
    png = io.BytesIO()
    fig.savefig(png, format="png")
    cell = nbformat.v4.new_code_cell("df", outputs=[
        nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(png.getvalue()).decode()}),
        nbformat.v4.new_output("execute_result", data={"text/html": pd.DataFrame({"a": [1]})._repr_html_()})])
    cell.metadata = {"papermill": {"duration": 0.25, "end_time": "2026-11-27T22:36:32+00:00", "exception": False,
                                   "start_time": "2026-11-27T22:36:31+00:00", "status": "completed"}, "tags": []}
    failed = nbformat.v4.new_code_cell("1 / 0")
    failed.metadata = {"papermill": {"duration": 0.1, "exception": True, "status": "failed"}, "tags": ["x"]}
    path = tmp_path / "a.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell, failed]), path)
    compact_notebook(path)
    once = path.read_bytes()
    cells = nbformat.read(path, as_version=4).cells
    assert cells[0].metadata == {"papermill": {"duration": 0.25}}
    assert cells[1].metadata == {"papermill": {"duration": 0.1, "exception": True, "status": "failed"}, "tags": ["x"]}
    compact_notebook(path)
    assert path.read_bytes() == once


def test_the_json_is_written_without_indentation_and_reads_back_the_same(tmp_path):
    """``write_compact``: the notebook Jupyter reads back is the one written; only the indentation is gone."""
    cell = nbformat.v4.new_code_cell("x = 1\nprint(x)", outputs=[stream("stdout", "1\n")])
    nb = nbformat.v4.new_notebook(cells=[cell, nbformat.v4.new_markdown_cell("# A\ntext")])
    path = tmp_path / "a.ipynb"
    nbformat.write(nb, path)
    indented = path.stat().st_size
    compact_notebook(path)
    text = path.read_text()
    assert "\n " not in text and ": " not in text and path.stat().st_size < indented
    assert nbformat.read(path, as_version=4) == nbformat.reads(nbformat.writes(nb), as_version=4)


def test_a_bar_redrawn_below_printed_lines_keeps_its_last_state_and_a_new_bar_of_one_name_stays(tmp_path):
    """tqdm.write prints a candidate's line (stdout) and redraws the bar (stderr) below it: a terminal ends on the
    lines and the bar's last state, and so does the compacted cell. A second bar of the same name (counting from 1
    again) keeps the first's end, and a finished bar stays whatever follows."""
    def bar(n: int) -> str:
        return f"v5 512x512: {25 * n:3d}%|{'#' * n}{' ' * (4 - n)}| {n}/4 [00:00<00:00,  5.0cand/s, best {n}.0]\n"
    outputs = [stream("stderr", bar(1)), stream("stdout", "  v5(a): 1.0 us\n"), stream("stderr", bar(2)),
               stream("stdout", "  v5(b): 2.0 us\n"), stream("stderr", bar(4) + "\n"),
               stream("stderr", bar(1)), stream("stdout", "  v5(c): 3 us\n"), stream("stderr", bar(2)),
               stream("stdout", "done\n"), stream("stderr", bar(4)), stream("stderr", bar(4))]
    path = tmp_path / "a.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("sweep()", outputs=outputs)]), path)
    compact_notebook(path)
    got = [(o.name, o.text) for o in nbformat.read(path, as_version=4).cells[0].outputs]
    assert got == [("stdout", "  v5(a): 1.0 us\n  v5(b): 2.0 us\n"), ("stderr", bar(4) + "\n"),
                   ("stdout", "  v5(c): 3 us\ndone\n"), ("stderr", bar(4) + bar(4))]
