"""Reports made small (``tirbench.report.slim``): the stylesheet keeps every rule, and every custom property, that
can apply to what the committed reports hold, in a tenth of the lab template's bytes; a report's body loses only
what a browser does not show; ``rerender`` writes what ``run_all`` would."""
import re
from pathlib import Path

import nbformat
import pytest
import tinycss2
from nbconvert import HTMLExporter

from tirbench.report import rerender, run_all
from tirbench.report.slim import slim_body, slim_stylesheet

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "results" / "reports"
#: The stylesheet's limit in bytes (the lab template's CSS is 260 KB).
MAX_SHEET_BYTES = 40_000


@pytest.fixture(scope="module")
def full_css() -> str:
    """The lab template's head styles, as ``render_report`` finds them."""
    body, _ = HTMLExporter().from_notebook_node(nbformat.v4.new_notebook())
    return "\n".join(re.findall(r"<style[^>]*>(.*?)</style>", body.split("</head>", 1)[0], re.S))


def norm(text: str) -> str:
    """CSS text with no space around a parenthesis or comma, one space elsewhere."""
    return re.sub(r"\s*([(),])\s*", r"\1", " ".join(text.split()))


def rules(css: str) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(media, selector) -> its declarations, custom properties apart, for every selector of every rule in order."""
    out: dict[tuple[str, str], list[tuple[str, str]]] = {}

    def walk(items, media: str) -> None:
        for rule in items:
            if rule.type == "at-rule" and rule.lower_at_keyword == "media":
                walk(tinycss2.parse_rule_list(rule.content, skip_comments=True, skip_whitespace=True),
                     norm(tinycss2.serialize(rule.prelude)))
            elif rule.type == "qualified-rule":
                decls = [(d.lower_name, norm(tinycss2.serialize(d.value)) + "!" * d.important)
                         for d in tinycss2.parse_blocks_contents(rule.content, skip_comments=True,
                                                                 skip_whitespace=True) if d.type == "declaration"]
                for sel in tinycss2.serialize(rule.prelude).split(","):
                    out.setdefault((media, norm(sel)), []).extend(decls)

    walk(tinycss2.parse_stylesheet(css, skip_comments=True, skip_whitespace=True), "")
    return out


def needed_classes(selector: str) -> set[str]:
    """The classes an element needs to match ``selector`` (those inside ``:not(...)`` are not needed)."""
    return set(re.findall(r"\.([\w-]+)", re.sub(r"\([^)]*\)|\[[^\]]*\]", "", selector)))


def custom_properties(decls: list[tuple[str, str]]) -> set[str]:
    """The custom properties that ``decls`` use."""
    return {name for _, value in decls for name in re.findall(r"var\(\s*(--[\w-]+)", value)}


def test_the_stylesheet_keeps_every_rule_the_reports_can_use_in_a_tenth_of_the_bytes(full_css):
    slim = slim_stylesheet(full_css)
    assert len(slim.encode()) < MAX_SHEET_BYTES < len(full_css.encode()) / 5
    assert slim_stylesheet(slim) == slim
    full, kept = rules(full_css), rules(slim)
    used = set()
    for page in sorted(REPORTS.glob("[0-9]*.html")):
        used |= {c for attr in re.findall(r'class="([^"]*)"', page.read_text()) for c in attr.split()}
    assert "jp-Cell" in used and "highlight" in used
    applying = {key: decls for key, decls in full.items() if needed_classes(key[1]) <= used}
    assert len(applying) > 100
    lost = [" ".join(key).strip() for key, decls in applying.items()
            if [d for d in kept.get(key, []) if not d[0].startswith("--")] != [d for d in decls
                                                                              if not d[0].startswith("--")]]
    assert not lost, f"rules the reports can use, lost or changed: {lost[:5]}"
    declared: dict[str, list[str]] = {}
    for decls in applying.values():
        for name, value in decls:
            if name.startswith("--"):
                declared.setdefault(name, []).append(value)
    todo = set().union(*(custom_properties([d for d in decls if not d[0].startswith("--")])
                         for decls in applying.values()))
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        seen.add(name)
        todo |= custom_properties([("", value) for value in declared.get(name, [])]) - seen
    lost = [key for key, decls in applying.items()
            if [d for d in kept.get(key, []) if d[0] in seen] != [d for d in decls if d[0] in seen]]
    assert not lost, f"custom properties the reports use, lost or changed in: {lost[:5]}"
    assert len(seen) > 50


def test_a_body_loses_only_what_a_browser_does_not_show():
    css = ".highlight .o{font-weight:bold}\n.jp-Collapser{display:none}\n"
    head = ('<html><head><script type="module">\n  const d = document.querySelectorAll(".jp-Mermaid > pre");\n'
            '</script>\n<!-- End of mermaid configuration --><link href="report.css" rel="stylesheet"/>\n</head>')
    cell = ('<div class="jp-Cell-inputWrapper">\n<div class="jp-Collapser jp-InputCollapser jp-Cell-inputCollapser">\n'
            '</div>\n<div class="highlight"><pre><span></span><span class="n">x</span> <span class="o">=</span> '
            '<span class="s3">1</span><span class="nb">len</span></pre></div>'
            '<style>.tvmscript .s3{color: #008000}</style></div>')
    out = slim_body(f"{head}<body>{cell}</body></html>", css)
    assert out == ('<html><head><link href="report.css" rel="stylesheet"/>\n</head><body>'
                   '<div class="jp-Cell-inputWrapper">\n<div class="highlight"><pre>x <span class="o">=</span> '
                   '<span class="s3">1</span>len</pre></div><style>.tvmscript .s3{color: #008000}</style></div>'
                   '</body></html>')
    diagram = f'{head}<body><div class="jp-Mermaid"><pre class="mermaid">graph LR</pre></div></body></html>'
    assert "<script" in slim_body(diagram, css)   # a report with a diagram keeps its loader


def test_committed_reports_are_slim():
    sheet = REPORTS / run_all.STYLESHEET
    assert sheet.stat().st_size < MAX_SHEET_BYTES
    for page in sorted(REPORTS.glob("[0-9]*.html")):
        text = page.read_text()
        assert "jp-Collapser" not in text and "End of mermaid configuration" not in text, page.name
        assert '<span class="n">' not in text, page.name


def test_rerender_compacts_and_writes_what_run_all_would(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1", outputs=[nbformat.v4.new_output(
        "stream", name="stdout", text="a\n"), nbformat.v4.new_output("stream", name="stdout", text="b\n")])])
    executed = tmp_path / "executed" / "98_a.ipynb"
    executed.parent.mkdir()
    nbformat.write(nb, executed)
    rerender.rerender([executed], tmp_path / "reports")
    assert [o.text for o in nbformat.read(executed, as_version=4).cells[0].outputs] == ["a\nb\n"]
    written = (tmp_path / "reports" / "98_a.html").read_text()
    assert written == run_all.render_report(executed, tmp_path / "again")
    assert (tmp_path / "reports" / "report.css").read_text() == (tmp_path / "again" / "report.css").read_text()


def test_rerender_of_a_missing_copy_is_one_line(monkeypatch, tmp_path, capsys):
    (tmp_path / "results" / "executed").mkdir(parents=True)
    monkeypatch.setattr(rerender, "project_root", lambda: tmp_path)
    assert rerender.main(["99_none"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "no executed copy 99_none.ipynb" in err
    assert not (tmp_path / "results" / "reports").exists()
