"""``compile_model``: a Relax module compiled for the GPU with the suite's conv rules ahead of TVM's default pipeline.

The passes before ``tvm.compile`` (``passes``, a list as ``relax.get_pipeline`` keeps one):
``FoldBatchnormToConv2D`` and ``FoldConstant`` where the module has batch norms; with ``fp16`` (after that
``FoldConstant``, or one of its own: the folded batch norms' scales must be constants first) ``ClipToMinMax``
(MobileNetV2's ReLU6) and ``ToMixedPrecision``, which makes every conv (and matmul) read float16, casting the
model's input and output (float32 in the exported model: 0.27's torch importer writes every conv as
``out_dtype="float32"``, so the model is exported in float32 and converted here). With the rules each conv also
writes float16 (``out_dtype="float16"``: the tensor-core families' kernels sum in float32 and store float16);
without them, as TVM's default pipeline and MetaSchedule take the model, each conv sums and writes float32 and a
cast follows (``out_dtype="float32"``: legalized with a float16 output, a conv sums in float16, which misses the
float16 tolerance on ResNet-50). With ``nhwc``, ``ConvertLayout`` of every conv to ``NHWC_LAYOUT`` (the NHWC
families' layouts: the model runs NHWC between its layers, transposed at its ends and around the ops ConvertLayout
does not know) and ``FoldConstant`` (the weights' and biases' transposes); then the rules' dispatch
(``dispatch.DispatchConvRules``) and ``FoldConstant`` (the weight transposes it adds, where the weights are bound
constants). ``tvm.compile`` then runs TVM's default GPU pipeline: LegalizeOps (the convs left to it become
``conv2d`` PrimFuncs), FuseOps, FuseTIR and DLight's default schedules for everything not marked
``tirx.is_scheduled``; every PrimFunc is lowered by the suite's TIR pipeline (``core.lowering.PIPELINE``: TVM's
default plus the families' rewrites), under the dispatched kernels' PassContext config
(``dispatch.pass_config_of``).
"""
from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from tirbench.bench.choose import Choices
from tirbench.compile.dispatch import DispatchConvRules, pass_config_of
from tirbench.core import lowering


def has_op(mod: tvm.IRModule, op_name: str) -> bool:
    """Whether a Relax function of ``mod`` calls the operator ``op_name``."""
    return count_ops(mod, op_name) > 0


def count_ops(mod: tvm.IRModule, op_name: str) -> int:
    """How many calls of the operator ``op_name`` the Relax functions of ``mod`` make."""
    found = []

    def visit(expr: relax.Expr) -> None:
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name == op_name:
            found.append(expr)

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return len(found)


@mutator
class _ClipToMinMax(PyExprMutator):
    def visit_call_(self, call: relax.Call) -> relax.Expr:
        new = super().visit_call_(call)
        if not (isinstance(new.op, tvm.ir.Op) and new.op.name == "relax.clip"):
            return new
        x, low, high = new.args
        dtype = str(new.ty.dtype)
        if not all(isinstance(b, (tvm.tirx.FloatImm, tvm.tirx.IntImm)) for b in (low, high)):
            return new
        bound = [relax.const(float(b.value), dtype) for b in (low, high)]
        return relax.op.minimum(relax.op.maximum(x, bound[0]), bound[1])


@tvm.transform.module_pass(opt_level=0, name="tirbench.ClipToMinMax")
class ClipToMinMax:
    """``R.clip(x, low, high)`` with constant bounds (torch's ReLU6, hardtanh) as ``R.minimum(R.maximum(x, low),
    high)`` of scalar constants of ``x``'s dtype: ``ToMixedPrecision`` knows those, and fails on ``relax.clip``'s
    float64 ``PrimValue`` bounds ("Expected TensorType, but got T.float64")."""

    def transform_module(self, mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        rewriter = _ClipToMinMax(mod)
        for gv, func in mod.functions_items():
            if isinstance(func, relax.Function):
                rewriter.builder_.update_func(gv, rewriter.visit_expr(func))
        return rewriter.builder_.get()


#: What ``passes(nhwc=True)`` converts each conv to: (data and output, weights) layouts, the NHWC families' own.
NHWC_LAYOUT = {"relax.nn.conv2d": ["NHWC", "HWIO"]}


def passes(mod: tvm.IRModule, target: tvm.target.Target, *, rules: bool = True, choices: Choices | None = None,
           fp16: bool = False, nhwc: bool = False) -> list[tvm.transform.Pass]:
    """The passes ``compile_model`` runs before ``tvm.compile`` (see the module docstring)."""
    out: list[tvm.transform.Pass] = []
    batch_norms = has_op(mod, "relax.nn.batch_norm")
    if batch_norms:
        out += [relax.transform.FoldBatchnormToConv2D()]
    if batch_norms or fp16:
        out += [relax.transform.FoldConstant()]
    if fp16:
        out += [ClipToMinMax(), relax.transform.ToMixedPrecision(out_dtype="float16" if rules else "float32")]
    if nhwc:
        out += [relax.transform.ConvertLayout(NHWC_LAYOUT), relax.transform.FoldConstant()]
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
                  choices: Choices | None = None, fp16: bool = False, nhwc: bool = False) -> tvm.runtime.Executable:
    """``mod`` (a Relax module with a ``main`` function) compiled for ``target`` (a CUDA target for the build's arch,
    ``core.machine.cuda_target()``; or llvm, where the rules' kernels run with their threads one after another, for
    numerics), with the conv rules (``rules``; a recorded choice from ``choices`` where it still applies) or without
    (TVM's default pipeline alone); ``fp16``: in float16 (``ToMixedPrecision``); ``nhwc``: NHWC between its layers
    (``ConvertLayout``; see the module docstring). One-line ValueErrors for a module without a Relax ``main`` or a
    bad target."""
    if not _has_relax_main(mod):
        raise ValueError(f"compile_model takes an IRModule with a Relax function main, not {type(mod).__name__}")
    target = _target(target)
    with target:
        mod = tvm.transform.Sequential(passes(mod, target, rules=rules, choices=choices, fp16=fp16,
                                              nhwc=nhwc))(mod)
    return compile_passed(mod, target)


def compile_passed(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.runtime.Executable:
    """``mod`` after ``passes`` compiled for ``target``: ``compile_model``'s ``tvm.compile`` alone."""
    with tvm.transform.PassContext(config=pass_config_of(mod)):
        return tvm.compile(mod, target=target, tir_pipeline=lowering.PIPELINE)
