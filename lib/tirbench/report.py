"""Regenerate the README's results table from results/*/results.csv (latest run of each notebook).

    python -m tirbench.report README.md

rewrites the text between ``<!-- results:start -->`` and ``<!-- results:end -->``; nothing is typed by hand.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path


from tirbench.results import latest_run, read_results

START, END = "<!-- results:start -->", "<!-- results:end -->"


@dataclass(frozen=True)
class Headline:
    """Which rows of a notebook's latest run the README shows, and what they are compared with."""

    shapes: tuple[str, ...]   # rows with these shapes
    baseline: str             # variant each row is divided by; "{dtype}" is replaced by the row's dtype
    metric: str               # "gbps" or "gflops"
    variants: tuple[str, ...] | None = None   # only these variants (None: all)


HEADLINES: list[tuple[str, Headline]] = [
    ("01_vector_add", Headline(("67108864",), "a+b", "gbps")),
    ("02_window_sum", Headline(("67108864x3", "67108864"), "copy", "gbps")),
    ("03_gemm", Headline(("4096x4096x4096",), "cublas_{dtype}", "gflops")),
    ("03_gemm", Headline(("1024x1024x1024",), "cublas_{dtype}", "gflops",
                         ("v5_best", "v7_best", "v8_best", "metaschedule_float32", "metaschedule_v5_space_float32",
                          "cublas_float32", "cublas_float16"))),
]
UNITS = {"gbps": "GB/s", "gflops": "GFLOP/s"}


def headline_table(root: Path) -> str:
    """A markdown table: per notebook, the headline rows of its latest recorded GPU run."""
    lines = ["| notebook | workload | shape | variant | provider | median ms | rate | vs baseline | GPU, date |",
             "|---|---|---|---|---|---:|---:|---:|---|"]
    not_run: set[str] = set()
    for nb, head in HEADLINES:
        df = latest_run(read_results(root / "results" / nb / "results.csv"))
        if df.empty:
            if nb not in not_run:
                not_run.add(nb)
                lines.append(f"| {nb} | | | | | | | | not run on a GPU yet |")
            continue
        df = df[df["shape"].astype(str).isin(head.shapes)]
        if head.variants is not None:
            df = df[df["variant"].isin(head.variants)]
        for r in df.itertuples():
            baseline = head.baseline.format(dtype=r.dtype)
            base = df.loc[(df["variant"] == baseline) & (df["dtype"] == r.dtype), head.metric]
            ratio = f"{getattr(r, head.metric) / base.iloc[0]:.3f}x {baseline}" if len(base) else ""
            lines.append(f"| {nb} | {r.workload} | {r.shape} | {r.variant} | {r.provider} | {r.median_ms:.4f} | "
                         f"{getattr(r, head.metric):,.0f} {UNITS[head.metric]} | {ratio} | "
                         f"{r.gpu}, {str(r.timestamp)[:10]} |")
    return "\n".join(lines)


def update_readme(readme: Path, root: Path) -> bool:
    """Replace the marked section of ``readme``; returns whether the file changed."""
    text = readme.read_text()
    if START not in text or END not in text:
        raise ValueError(f"{readme} has no {START} ... {END} section")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{START}\n{headline_table(root)}\n{END}{tail}"
    if new != text:
        readme.write_text(new)
    return new != text


def main(argv: list[str]) -> int:
    readme = Path(argv[1] if len(argv) > 1 else "README.md").resolve()
    changed = update_readme(readme, readme.parent)
    print(f"{readme.name}: results table {'updated' if changed else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
