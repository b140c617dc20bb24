"""HTML reports made small: what a reader sees stays the same, the bytes do not.

- The stylesheet (``slim_stylesheet``): nbconvert's lab template carries all of JupyterLab's CSS (its file browser,
  dialogs, toolbars, icons as data URIs); a report keeps the rules that can apply to what it holds. A selector that
  names a class of JupyterLab's own (``NAMESPACES``) that the template never writes (``template_classes``) matches
  nothing and goes; so does a rule left with no selector, a custom property that no kept rule uses (directly or
  through another), a ``@media`` left empty, an unused ``@keyframes``, every comment and the spaces between tokens.
- The body (``slim_body``): a ``<span class="x">`` around text whose class no style names (Pygments' ``n`` for a
  name, ``nb``, ``nn``: uncoloured) becomes that text (the same characters in the same colours and places; a browser
  may smooth a glyph's edge by a shade, the run of text being longer); an empty ``<span></span>`` goes; so do the
  collapsers, which the lab template hides (``.jp-Collapser {display: none}``), and the Mermaid loader where the
  report has no diagram.
"""
from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import tinycss2
from nbconvert import HTMLExporter
from tinycss2.ast import WhitespaceToken

#: Class prefixes of JupyterLab's own widgets (and of Lumino and CodeMirror inside it).
NAMESPACES = ("jp-", "lm-", "cm-")
_NAMED = re.compile(r"\.(-?[_a-zA-Z][\w-]*)")
_VAR = re.compile(r"var\(\s*(--[\w-]+)")
_PLAIN_SPAN = re.compile(r'<span class="([\w-]+)">([^<]*)</span>')
_COLLAPSER = re.compile(r'<div class="jp-Collapser [^"]*">\s*</div>\s*')
_MERMAID = re.compile(r'<script type="module">(?:(?!</script>).)*?jp-Mermaid.*?</script>\s*'
                      r'(?:<!-- End of mermaid configuration -->)?', re.S)


@cache
def template_files() -> tuple[Path, ...]:
    """The files of the template ``HTMLExporter`` renders with (lab, and base that it extends)."""
    return tuple(sorted({p for d in HTMLExporter().template_paths for p in Path(d).glob("*.j2")}))


@cache
def template_classes() -> frozenset[str]:
    """Every JupyterLab class (``NAMESPACES``) and custom property that the template's files name: what its markup
    and scripts can write or read."""
    prefixes = "|".join(re.escape(p) for p in NAMESPACES)
    return frozenset(name for path in template_files()
                     for name in re.findall(rf"(?:{prefixes}|--)[\w-]+", path.read_text()))


def _minified(tokens: list) -> str:
    """``tokens`` serialized without comments, each run of spaces one space, none at either end (of the whole or of
    a function's arguments or a block's content)."""
    return tinycss2.serialize(_cleaned(tokens))


def _cleaned(tokens: list) -> list:
    """``tokens`` without comments or runs of spaces (see ``_minified``), functions and blocks too."""
    out: list = []
    for token in tokens:
        if token.type == "comment":
            continue
        if token.type == "whitespace":
            if out and out[-1].type != "whitespace":
                out.append(WhitespaceToken(token.source_line, token.source_column, " "))
            continue
        if token.type == "function":
            token.arguments = _cleaned(token.arguments)
        elif token.type in ("() block", "[] block", "{} block"):
            token.content = _cleaned(token.content)
        out.append(token)
    while out and out[-1].type == "whitespace":
        out.pop()
    return out


def _selectors(prelude: list) -> list[list]:
    """The selectors of a rule's selector list (split at its top-level commas)."""
    parts: list[list] = [[]]
    for token in prelude:
        if token.type == "literal" and token.value == ",":
            parts.append([])
        else:
            parts[-1].append(token)
    return parts


def can_match(selector: list, known: frozenset[str]) -> bool:
    """False where ``selector`` needs an element to have a JupyterLab class that is not ``known`` (a class inside
    ``:not(...)`` or another function is not needed)."""
    needed = {b.value for a, b in zip(selector, selector[1:])
              if a.type == "literal" and a.value == "." and b.type == "ident"}
    return all(name in known for name in needed if name.startswith(NAMESPACES))


def _declarations(content: list) -> list[tuple[str, str]]:
    """A rule's declarations: (name, value with ``!important`` where it has it)."""
    return [(d.name if d.name.startswith("--") else d.lower_name,
             _minified(d.value) + ("!important" if d.important else ""))
            for d in tinycss2.parse_blocks_contents(content, skip_comments=True, skip_whitespace=True)
            if d.type == "declaration"]


def _pruned(rules: list, known: frozenset[str]) -> list:
    """``rules`` as (kind, head, body): qualified rules with only the selectors that can match (and
    their declarations), ``@media`` with its rules pruned alike; other at-rules as they are."""
    out = []
    for rule in rules:
        if rule.type == "qualified-rule":
            kept = [_minified(s) for s in _selectors(rule.prelude) if can_match(s, known)]
            if kept:
                out.append(("rule", ",".join(kept), _declarations(rule.content)))
        elif rule.type == "at-rule" and rule.lower_at_keyword == "media" and rule.content is not None:
            inner = _pruned(tinycss2.parse_rule_list(rule.content, skip_comments=True, skip_whitespace=True), known)
            if inner:
                out.append(("media", f"@media {_minified(rule.prelude)}", inner))
        elif rule.type == "at-rule":
            out.append(("at", f"@{rule.at_keyword} {_minified(rule.prelude)}".rstrip(),
                        None if rule.content is None else _minified(rule.content)))
    return out


def _used(items: list, names: set[str]) -> None:
    """Add to ``names`` every custom property and identifier the (non-custom) declarations of ``items`` use."""
    for kind, _, body in items:
        if kind == "media":
            _used(body, names)
        elif kind == "rule":
            for name, value in body:
                if not name.startswith("--"):
                    names.update(re.findall(r"[\w-]+", value))


def _properties(items: list) -> dict[str, list[str]]:
    """Each custom property the rules declare -> the values it is given."""
    out: dict[str, list[str]] = {}
    for kind, _, body in items:
        if kind == "media":
            for name, values in _properties(body).items():
                out.setdefault(name, []).extend(values)
        elif kind == "rule":
            for name, value in body:
                if name.startswith("--"):
                    out.setdefault(name, []).append(value)
    return out


def _written(items: list, used: set[str]) -> list[str]:
    """The CSS text of ``items``, one rule a line, without the custom properties that are not ``used``, the rules
    left empty, and ``@keyframes`` that no kept declaration names."""
    lines = []
    for kind, head, body in items:
        if kind == "rule":
            kept = [f"{name}:{value}" for name, value in body if not name.startswith("--") or name in used]
            if kept:
                lines.append(f"{head}{{{';'.join(kept)}}}")
        elif kind == "media":
            inner = _written(body, used)
            if inner:
                lines.append(f"{head}{{\n" + "\n".join(inner) + "\n}")
        elif not head.lower().startswith("@keyframes") or head.split()[1] in used:
            lines.append(head + (";" if body is None else f"{{{body}}}"))
    return lines


def slim_stylesheet(css: str) -> str:
    """``css`` (the lab template's head styles) with only what can apply to a report (see the module docstring)."""
    known = template_classes()
    items = _pruned(tinycss2.parse_stylesheet(css, skip_comments=True, skip_whitespace=True), known)
    properties = _properties(items)
    used = {name for name in known if name.startswith("--")}
    _used(items, used)
    todo = [name for name in used if name in properties]
    while todo:
        for value in properties[todo.pop()]:
            for name in _VAR.findall(value):
                if name not in used:
                    used.add(name)
                    todo.append(name)
    return "\n".join(_written(items, used)) + "\n"


def slim_body(html: str, css: str) -> str:
    """A report's HTML (its head's styles already moved to ``css``, the stylesheet it links) made small (see the
    module docstring)."""
    named = set(_NAMED.findall(css))
    for style in re.findall(r"<style[^>]*>(.*?)</style>", html, re.S):
        named.update(_NAMED.findall(style))
    html = _PLAIN_SPAN.sub(lambda m: m[0] if m[1] in named else m[2], html).replace("<span></span>", "")
    html = _COLLAPSER.sub("", html)
    return html if "jp-Mermaid" in html.split("</head>", 1)[-1] else _MERMAID.sub("", html, count=1)
