"""The epilogues after a ``relax.nn.conv2d`` in a Relax function: ``find_chains`` reads conv -> + bias -> + residual
-> ReLU (each step but the conv optional, in that order) as one ``Chain``, for ``dispatch`` to fuse into the conv's
kernel.

The chains are TVM's own patterns (``relax.backend.patterns``: ``make_fused_bias_activation_pattern`` and
``make_residual_block_pattern``, what the cuDNN and CUTLASS tables partition with), matched longest first at each
binding from the last one up, so a conv joins the longest chain that ends on it. A single add reads as a bias when the
other operand has one value per output channel ((1, K, 1, 1) or (K, 1, 1): torch's conv bias, a folded batch norm;
(1, 1, 1, K) on an NHWC conv), as a residual when it has the conv's output shape (ResNet's shortcut), of the conv's
dtype either way; after a bias, the next add is a residual (either operand order). As TVM's
``has_leaking_intermediate_variables`` asks, every value inside a chain (the conv, the adds before its end) is a
dataflow variable used once, by the next step: a value the rest of the function also reads is not fused away.
"""
from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import relax
from tvm.relax.backend.patterns import make_fused_bias_activation_pattern, make_residual_block_pattern
from tvm.relax.dpl import CallPattern, DFPattern

from tirbench.workloads.conv2d import ConvEpilogue

RELU = "relax.nn.relu"


@dataclass(frozen=True)
class Chain:
    """A conv and its epilogue in a Relax function: the ``conv`` call, the ``end`` call (the last step, whose
    binding a fused kernel replaces), the ``bias`` and ``residual`` operands (None where absent), the
    ``epilogue`` they make, and the calls before the end (``inner``: the conv and the adds)."""

    conv: relax.Call
    end: relax.Call
    epilogue: ConvEpilogue
    bias: relax.Expr | None = None
    residual: relax.Expr | None = None
    inner: tuple[relax.Call, ...] = ()


def _table() -> list[tuple[DFPattern, dict[str, DFPattern], bool]]:
    """(pattern, annotations, whether its first add is a bias followed by a residual add), longest first."""
    table = []
    for relu in (RELU, None):
        table.append((*make_residual_block_pattern(make_fused_bias_activation_pattern(
            "relax.nn.conv2d", with_bias=True), activation=relu), True))
    for relu in (RELU, None):
        table.append((*make_fused_bias_activation_pattern("relax.nn.conv2d", with_bias=True, activation=relu), False))
    table.append((*make_fused_bias_activation_pattern("relax.nn.conv2d", activation=RELU), False))
    return table


def _shape(expr: relax.Expr) -> tuple[int, ...] | None:
    shape = getattr(expr.ty, "shape", None)
    if shape is None or not all(isinstance(d, tvm.tirx.IntImm) for d in shape.values):
        return None
    return tuple(int(d) for d in shape.values)


def _role(operand: relax.Expr, conv: relax.Call) -> str | None:
    """"bias", "residual" or None: what an add's ``operand`` is to ``conv``'s output (module docstring)."""
    out, shape = _shape(conv), _shape(operand)
    if out is None or shape is None or str(getattr(operand.ty, "dtype", "")) != str(conv.ty.dtype):
        return None
    if shape == out:
        return "residual"
    channel = str(conv.attrs.out_layout).index("C")   # NCHW: 1; NHWC (``ConvertLayout``): 3
    per_channel = tuple(out[channel] if axis == channel else 1 for axis in range(4))
    return "bias" if (1,) * (4 - len(shape)) + shape == per_channel else None


def _match(value: relax.Call, var2val, bound, table) -> Chain | None:
    """The longest chain of ``table`` that ends at ``value`` and whose operands play their roles; None if none.
    ``bound``: each bound value's variable (the matcher reports a wildcard's variable as its value)."""
    for pattern, names, bias_then_residual in table:
        found = pattern.extract_matched_expr(value, var2val)
        if found is None:
            continue
        conv = found[names["root"]]
        operands = {role: bound.get(found[names[role]], found[names[role]]) if role in names else None
                    for role in ("bias", "residual")}
        if bias_then_residual:
            if _role(operands["bias"], conv) != "bias" or _role(operands["residual"], conv) != "residual":
                continue
        elif operands["bias"] is not None:
            role = _role(operands["bias"], conv)
            if role is None:
                continue
            operands = {"bias": None, "residual": None, role: operands["bias"]}
        epilogue = ConvEpilogue(operands["bias"] is not None, operands["residual"] is not None,
                                value.op.same_as(tvm.ir.Op.get(RELU)))
        inner = []
        for key, call in found.items():
            if isinstance(key, CallPattern) and isinstance(call, relax.Call) and not call.same_as(value) and \
                    not any(call.same_as(c) for c in inner):
                inner.append(call)
        return Chain(conv, value, epilogue, operands["bias"], operands["residual"], tuple(inner))
    return None


def find_chains(func: relax.Function) -> list[Chain]:
    """The chains of ``func`` whose inner values are dataflow variables used once, by the next step (module
    docstring), each conv in at most one (the longest)."""
    var2val = relax.analysis.get_var2val(func)
    bound = {value: var for var, value in var2val.items()}
    table, chains, taken = _table(), [], set()
    for block in func.body.blocks if isinstance(func.body, relax.SeqExpr) else ():
        if not isinstance(block, relax.DataflowBlock):
            continue
        users = relax.analysis.udchain(block)
        for binding in reversed(block.bindings):
            value = binding.value
            chain = _match(value, var2val, bound, table) if isinstance(value, relax.Call) else None
            if chain is None or chain.conv in taken:
                continue
            inner = [bound.get(call) for call in chain.inner]
            if all(isinstance(var, relax.DataflowVar) and len(users.get(var, ())) == 1 for var in inner):
                chains.append(chain)
                taken.add(chain.conv)
    return chains
