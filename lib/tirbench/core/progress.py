"""Progress bars for tile sweeps and tuning: tqdm (a widget in Jupyter where ipywidgets is installed, text
elsewhere: no warning about a missing widget) that shows the best rate found so far."""
from __future__ import annotations

import importlib.util
from typing import Iterable, Iterator, TypeVar

if importlib.util.find_spec("ipywidgets") is not None:
    from tqdm.auto import tqdm
else:
    from tqdm.std import tqdm

T = TypeVar("T")


class BestBar:
    """A tqdm bar over ``items`` (or ``total`` steps, advanced with ``update``) whose postfix is the best rate
    offered so far: ``for cand in bar: ...; bar.offer(rate)``."""

    def __init__(self, items: Iterable[T] | None = None, *, desc: str, unit: str, total: int | None = None,
                 initial: int = 0, step: str = "cand"):
        self.unit = unit
        self.best: float | None = None
        self.bar = tqdm(items, desc=desc, total=total, initial=initial, unit=step, dynamic_ncols=True)

    def __iter__(self) -> Iterator[T]:
        return iter(self.bar)

    def offer(self, rate: float) -> bool:
        """Show ``rate`` if it beats the best so far; returns whether it did."""
        if self.best is not None and rate <= self.best:
            return False
        self.best = rate
        self.bar.set_postfix_str(f"best {rate:,.1f} {self.unit}")
        return True

    def update(self, n: int) -> None:
        self.bar.update(n)

    def write(self, line: str) -> None:
        """Print a line without breaking the bar on a terminal."""
        self.bar.write(line)

    def close(self) -> None:
        self.bar.close()
