"""``compile_model``: a Relax module compiled for the GPU with the suite's conv rules ahead of TVM's default pipeline.

The passes before ``tvm.compile`` (``passes``, a list as ``relax.get_pipeline`` keeps one): ``FoldBatchnormToConv2D``
and ``FoldConstant`` where the module has batch norms, then the rules' dispatch (``dispatch.DispatchConvRules``) and
``FoldConstant`` (the float16 layers' weight transposes, where the weights are bound constants). ``tvm.compile`` then
runs TVM's default GPU pipeline: LegalizeOps (the convs left to it become ``conv2d`` PrimFuncs), FuseOps, FuseTIR and
DLight's default schedules for everything not marked ``tirx.is_scheduled``; every PrimFunc is lowered by the suite's
TIR pipeline (``core.lowering.PIPELINE``: TVM's default plus the families' rewrites), under the dispatched kernels'
PassContext config (``dispatch.pass_config_of``).
"""
from __future__ import annotations

import tvm
from tvm import relax

from tirbench.bench.choose import Choices
from tirbench.compile.dispatch import DispatchConvRules, pass_config_of
from tirbench.core import lowering


def has_op(mod: tvm.IRModule, op_name: str) -> bool:
    """Whether a Relax function of ``mod`` calls the operator ``op_name``."""
    found = []

    def visit(expr: relax.Expr) -> None:
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name == op_name:
            found.append(expr)

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return bool(found)


def passes(mod: tvm.IRModule, target: tvm.target.Target, *, rules: bool = True,
           choices: Choices | None = None) -> list[tvm.transform.Pass]:
    """The passes ``compile_model`` runs before ``tvm.compile`` (see the module docstring)."""
    out: list[tvm.transform.Pass] = []
    if has_op(mod, "relax.nn.batch_norm"):
        out += [relax.transform.FoldBatchnormToConv2D(), relax.transform.FoldConstant()]
    if rules:
        out += [DispatchConvRules(target, choices), relax.transform.FoldConstant()]
    return out


def _target(target: tvm.target.Target | str | dict) -> tvm.target.Target:
    if isinstance(target, tvm.target.Target):
        return target
    try:
        return tvm.target.Target(target)
    except Exception as err:  # noqa: BLE001 - TVM's own error type for a target it cannot parse
        raise ValueError(f"target {target!r} is not a TVM target: {str(err).strip().splitlines()[-1]}") from None


def _has_relax_main(mod: object) -> bool:
    return isinstance(mod, tvm.IRModule) and any(gv.name_hint == "main" and isinstance(mod[gv], relax.Function)
                                                 for gv in mod.get_global_vars())


def compile_model(mod: tvm.IRModule, target: tvm.target.Target | str | dict, *, rules: bool = True,
                  choices: Choices | None = None) -> tvm.runtime.Executable:
    """``mod`` (a Relax module with a ``main`` function) compiled for ``target`` (a CUDA target for the build's arch,
    ``core.machine.cuda_target()``; or llvm, where the rules' kernels run with their threads one after another, for
    numerics), with the conv rules (``rules``; a recorded choice from ``choices`` where it still applies) or without
    (TVM's default pipeline alone). One-line ValueErrors for a module without a Relax ``main`` or a bad target."""
    if not _has_relax_main(mod):
        raise ValueError(f"compile_model takes an IRModule with a Relax function main, not {type(mod).__name__}")
    target = _target(target)
    with target:
        mod = tvm.transform.Sequential(passes(mod, target, rules=rules, choices=choices))(mod)
    with tvm.transform.PassContext(config=pass_config_of(mod)):
        return tvm.compile(mod, target=target, tir_pipeline=lowering.PIPELINE)
