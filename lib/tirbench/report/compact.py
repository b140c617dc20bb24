"""Executed notebooks made small before they are kept: what a reader sees stays the same, the bytes do not.

- PNG outputs become palette PNGs (256 colours) where that is smaller;
- consecutive stream outputs merge and each ``\\r``-overwritten progress line keeps only its last state, as a
  terminal would show it (nbconvert's ``CoalesceStreamsPreprocessor``); so does a tqdm bar that ``tqdm.write``
  redrew below each line it printed (``settled_bars``: a terminal shows the lines, then the bar's last state);
- an output that has HTML (a table, TVMScript) keeps no plain-text copy of it: Jupyter and the HTML report show the
  HTML;
- TVMScript shown by ``mod.show()`` (Pygments HTML with an inline ``style`` on every token) gets short classes and
  one ``<style>`` per output;
- a pandas table (``DataFrame._repr_html_``: a tag a line, indented) loses the spaces between its tags, which a
  browser does not show, and its scoped style's indentation: one line instead of one a tag, in the notebook's JSON too;
- papermill's record of each cell keeps its ``duration``; the start and end times go, and so do ``exception: false``
  and ``status: completed`` (a kept copy ran to its end) and an empty ``tags`` list;
- the JSON is written without indentation (``write_compact``; Jupyter reads it alike and indents it again when it
  saves): a twentieth of the bytes.

Compacting a compacted notebook changes nothing (``palette_png`` keeps a palette PNG as it is).
"""
from __future__ import annotations

import base64
import copy
import json
import re
from pathlib import Path

import nbformat
from nbconvert.preprocessors import CoalesceStreamsPreprocessor
from nbformat.v4.rwbase import split_lines, strip_transient

from tirbench.core.images import palette_png

#: The class that scopes the styles of a compacted TVMScript output.
SCRIPT_CLASS = "tvmscript"
_STYLE = re.compile(r'<span style="([^"]*)">')
_HIGHLIGHT = re.compile(r'^<div class="highlight" style="([^"]*)">')
#: How pandas' HTML of a table (``DataFrame._repr_html_``) begins, and its table.
_PANDAS, _TABLE = "<div>\n<style scoped>", '<table border="1" class="dataframe"'
#: papermill's per-cell record: the values that say nothing about a cell of a notebook that ran to its end.
_PAPERMILL_DROPPED = {"start_time": None, "end_time": None, "exception": False, "status": "completed"}
#: A tqdm bar's line: ``sweep 512x512:  25%|██▌       | 2/8 [00:00<00:01,  4.97cand/s, best 38.9 TFLOP/s]``.
_BAR = re.compile(r"^(?P<desc>.*?): *\d+%\|[^|]*\| *(?P<n>\d+)/(?P<total>\d+) \[.*\]$")


def script_classes(html: str) -> str:
    """Pygments HTML with inline styles (``tvm.script.highlight.cprint`` in a notebook) rewritten with one class per
    distinct style and a scoped ``<style>``; any other HTML comes back unchanged."""
    head = _HIGHLIGHT.match(html)
    if head is None:
        return html
    styles: dict[str, str] = {}
    body = _STYLE.sub(lambda m: f'<span class="{styles.setdefault(m[1], f"s{len(styles)}")}">', html)
    body = _HIGHLIGHT.sub(f'<div class="highlight {SCRIPT_CLASS}" style="{head[1]}">', body)
    rules = "".join(f".{SCRIPT_CLASS} .{name}{{{style}}}" for style, name in styles.items())
    return f"<style>{rules}</style>{body}"


def table_spaces(html: str) -> str:
    """A pandas table's HTML without the spaces between its tags, its ``<style>`` on one line; any other HTML comes
    back unchanged."""
    if not html.startswith(_PANDAS) or _TABLE not in html:
        return html
    html = re.sub(r"(<style[^>]*>)(.*?)(</style>)", lambda m: m[1] + " ".join(m[2].split()) + m[3], html, flags=re.S)
    return re.sub(r">\s+<", "><", html)


def settled_bars(outputs: list) -> list:
    """A cell's ``outputs`` without the tqdm bar lines that a later state of the same bar supersedes: the next bar
    line of that description, in any stream output of the cell, counts further towards the same total (a finished
    bar, or one that a new bar of that description follows from a lower count, stays); a stream output left with
    nothing but line ends goes."""
    lines = [o["text"].split("\n") if o.get("output_type") == "stream" else [] for o in outputs]
    dropped, last = set(), {}
    found = ((k, i, m) for k, text in enumerate(lines) for i, line in enumerate(text) if (m := _BAR.match(line)))
    for k, i, m in found:
        desc, n, total = m["desc"], int(m["n"]), m["total"]
        before = last.get(desc)
        if before is not None and before[3] == total and before[2] < min(n, int(total)):
            dropped.add(before[:2])
        last[desc] = (k, i, n, total)
    kept, touched = [], {k for k, _ in dropped}
    for k, output in enumerate(outputs):
        if k in touched:
            output["text"] = "\n".join(line for i, line in enumerate(lines[k]) if (k, i) not in dropped)
            if not output["text"].strip("\n"):
                continue
        kept.append(output)
    return kept


def papermill_record(metadata: dict) -> None:
    """Drop from a cell's ``metadata`` what papermill records that says nothing (see the module's docstring)."""
    record = metadata.get("papermill", {})
    for key, dull in _PAPERMILL_DROPPED.items():
        if key in record and (dull is None or record[key] == dull):
            del record[key]
    if metadata.get("tags") == []:
        del metadata["tags"]


def compact_notebook(path: Path) -> None:
    """Rewrite the executed notebook at ``path`` with its outputs compacted (see the module's docstring)."""
    nb = nbformat.read(path, as_version=4)
    nb, _ = CoalesceStreamsPreprocessor().preprocess(nb, {})
    for cell in nb.cells:
        if "outputs" in cell:
            cell.outputs = settled_bars(cell.outputs)
    nb, _ = CoalesceStreamsPreprocessor().preprocess(nb, {})   # the streams a dropped bar kept apart
    for cell in nb.cells:
        papermill_record(cell.metadata)
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" in data:
                data["image/png"] = base64.b64encode(palette_png(base64.b64decode(data["image/png"]))).decode()
            if "text/html" in data:
                data["text/html"] = table_spaces(script_classes(data["text/html"]))
                data.pop("text/plain", None)
    write_compact(nb, path)


def write_compact(nb: nbformat.NotebookNode, path: Path) -> None:
    """Write ``nb`` to ``path`` as ``nbformat.write`` does (validated, sources split into lines, keys sorted, transient
    fields dropped) but without the indentation and the spaces after separators."""
    nbformat.validate(nb)
    Path(path).write_text(json.dumps(strip_transient(split_lines(copy.deepcopy(nb))), sort_keys=True,
                                     separators=(",", ":"), ensure_ascii=False) + "\n", encoding="utf-8")
