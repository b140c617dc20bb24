"""``python -m tirbench.kernel gemm M N K`` / ``conv2d N C H W K R S STRIDE PAD [--groups G] [--dilation D]``: the
rules' kernels for one workload (``kernel.run.best_kernel``), printed as a table. STRIDE and ``--dilation``: one
integer or two joined by 'x' (per axis, ``2x1``); PAD: one, two (per axis, ``0x3``) or four (top x bottom x left x
right). Bad input: one line naming the parameter, exit status 2 (as is a layer no family takes: groups, dilation, a
stride or padding per axis); no verified kernel, or a failure inside TVM: one line, exit status 1."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn, Sequence

from tirbench.bench.sweep import one_line
from tirbench.core.errors import OneLineError
from tirbench.kernel.run import best_kernel, conv_layer
from tirbench.workloads import gemm
from tirbench.workloads.base import Workload

SIZES = {"gemm": ("M", "N", "K"), "conv2d": ("N", "C", "H", "W", "K", "R", "S", "STRIDE", "PAD")}


class OneLineParser(argparse.ArgumentParser):
    """Errors as one line on stderr (no usage block), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not above 0")
    return value


def _per_axis(text: str) -> int | tuple[int, ...]:
    """"2" -> 2, "2x1" -> (2, 1): one integer, or several joined by 'x' (the workload checks how many and their
    values)."""
    try:
        values = tuple(int(part) for part in text.split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer or integers joined by 'x'") from None
    return values[0] if len(values) == 1 else values


def parser() -> OneLineParser:
    p = OneLineParser(prog="python -m tirbench.kernel", description=__doc__)
    sub = p.add_subparsers(dest="workload", required=True, parser_class=OneLineParser)
    for name, sizes in SIZES.items():
        q = sub.add_parser(name, help=f"sizes {' '.join(sizes)}")
        for size in sizes:
            if size in ("STRIDE", "PAD"):
                q.add_argument(size, type=_per_axis, help="an integer, or integers joined by 'x' (per axis"
                                                           + (" or per side: TOPxBOTTOMxLEFTxRIGHT)" if size == "PAD"
                                                              else ": SHxSW)"))
            else:
                q.add_argument(size, type=int, help="an integer")
        q.add_argument("--dtype", default="float32", help="float32 or float16" + (", int8" if name == "conv2d" else ""))
        if name == "gemm":
            q.add_argument("--out-dtype", default=None, help="C's dtype: float32 (default) or float16 (fp16 inputs)")
        else:
            q.add_argument("--layout", default=None, help="NCHW or NHWC (default: NCHW for float32, NHWC for "
                                                          "float16; int8 is NC/32HW32)")
            q.add_argument("--groups", type=int, default=1, help="groups of channels (C: depthwise); default 1")
            q.add_argument("--dilation", type=_per_axis, default=1, help="an integer or DHxDW; default 1")
        q.add_argument("--keep", type=_positive, default=None, help="candidates per family (default: the rules')")
        q.add_argument("--repeats", type=_positive, default=50, help="timed launches per kernel (GPU)")
        q.add_argument("--seed", type=int, default=0)
        q.add_argument("--out", type=Path, default=None, help="folder for the CUDA (default: build/kernel/)")
        q.add_argument("--csv", type=Path, default=None, help="append the choice's and the vendor's rows to this "
                                                              "results CSV (GPU)")
    return p


def workload(args: argparse.Namespace) -> Workload:
    """The workload the arguments name; one-line ValueError for a bad size, dtype, layout, stride, padding, groups or
    dilation."""
    sizes = [getattr(args, size) for size in SIZES[args.workload]]
    if args.workload == "gemm":
        return gemm(*sizes, dtype=args.dtype, out_dtype=args.out_dtype or "float32")
    return conv_layer(*sizes, dtype=args.dtype, layout=args.layout, groups=args.groups, dilation=args.dilation)


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    try:
        wl = workload(args)
        result = best_kernel(wl, keep=args.keep, repeats=args.repeats, seed=args.seed, out=args.out, csv=args.csv)
    except OneLineError as err:   # no verified kernel, a results file that is not whole: one line, exit status 1
        print(f"{p.prog}: error: {err}", file=sys.stderr)
        return 1
    except ValueError as err:     # bad input (a size, dtype, layout, stride no rule takes): one line, exit status 2
        p.exit(2, f"{p.prog}: error: {err}\n")
    except Exception as err:  # noqa: BLE001 - a failure inside TVM on this workload: one line, not a stack dump
        print(f"{p.prog}: error: the rules failed on this workload ({one_line(err)})", file=sys.stderr)
        return 1
    print(result.table())
    print(result.summary())
    return 0
