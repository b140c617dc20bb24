"""The conv rules as a Relax pass: each ``relax.nn.conv2d`` the rules take becomes ``R.call_tir`` of the kernel they
choose for it (``kernels.choose_kernel``), as TVM's dispatch passes rewrite an op into calls of their own kernels;
a conv they refuse stays ``relax.nn.conv2d``, and TVM's default pipeline legalizes it and DLight schedules it.

Layout: float32 layers run NCHW, the model's layout. float16 layers run on the NHWC tensor-core families, so the
pass transposes around each one: ``R.permute_dims`` of the data (NCHW -> NHWC) and of the output (back to NCHW),
two extra passes over device memory per layer, each as many bytes as the activation (the weights' transpose
(OIHW -> RSCK) folds into a constant where they are bound constants, else it is a third pass). Relax's
``ConvertLayout`` could keep the model NHWC between layers instead, with transposes at its ends only; not done here.
A float16 layer the model writes as float32 (``ToMixedPrecision(out_dtype="float32")``) gets its kernel's float16
output cast (``R.astype``): one more rounding than the model asked for, what cuDNN's fp16 convolution does.

Epilogues (bias add, ReLU, residual add) stay separate Relax ops in this version: the kernel is opaque to
``FuseOps`` (``op_pattern``), which fuses the epilogue into a kernel of its own (``fused_add_relu``), one more pass
over the output; fusing them into the kernel's store is next.

All dispatched kernels build in one ``tvm.compile`` under one PassContext (``pass_config_of``): a layer whose
family's config (``kernels.build_config``) contradicts one already dispatched stays ``relax.nn.conv2d``.
"""
from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from tirbench.bench.choose import Choices
from tirbench.compile.kernels import LAYOUT, ConvKernel, choose_kernel
from tirbench.compile.layer import RelaxConv, is_conv2d, layer_of
from tirbench.core.gpu import current_gpu

#: Transposes of an NCHW activation to NHWC and back, and of an OIHW filter to the NHWC families' (R, S, C, K).
TO_NHWC, TO_NCHW, TO_RSCK = (0, 2, 3, 1), (0, 3, 1, 2), (2, 3, 1, 0)


@dataclass(frozen=True)
class LayerNote:
    """What the pass did with one conv: the kernel it called (``kernel``), or why it left the conv (``reason``)."""

    layer: str
    kernel: str | None = None
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.layer}: {self.kernel}" if self.kernel else f"{self.layer}: left to DLight ({self.reason})"


def serial_for(target: tvm.target.Target) -> bool:
    """Whether kernels for ``target`` are built without thread bindings (llvm: numerics without a GPU); a one-line
    ValueError for a target that is neither CUDA for the build's architecture (``current_gpu().arch``, which the
    rules and the families' ``needs`` read) nor llvm."""
    kind = target.kind.name
    if kind == "llvm":
        return True
    if kind != "cuda":
        raise ValueError(f"the conv rules build for cuda or llvm targets, not {kind}")
    if str(target.arch) != current_gpu().arch:
        raise ValueError(f"target arch {target.arch}, but the rules build for {current_gpu().arch}: set "
                         f"TIRBENCH_ARCH={target.arch}")
    return False


@mutator
class _ConvDispatcher(PyExprMutator):
    def __init__(self, mod: tvm.IRModule, serial: bool, choices: Choices | None):
        super().__init__(mod)
        self.serial, self.choices = serial, choices
        self.notes: list[LayerNote] = []
        self.config: dict[str, bool] = {}
        self.kernels: dict[tuple[str, str], ConvKernel | str] = {}

    def _kernel(self, layer: RelaxConv) -> ConvKernel:
        wl = layer.workload(LAYOUT[layer.dtype])
        key = (wl.shape, wl.dtype)
        if key not in self.kernels:
            try:
                self.kernels[key] = choose_kernel(wl, choices=self.choices, serial=self.serial)
            except ValueError as err:
                self.kernels[key] = str(err)
        if isinstance(self.kernels[key], str):
            raise ValueError(self.kernels[key])
        return self.kernels[key]

    def _agree(self, kernel: ConvKernel) -> None:
        config = kernel.func.attrs["tirbench.pass_config"]
        for key, value in config.items():
            if self.config.get(str(key), bool(value)) != bool(value):
                raise ValueError(f"{kernel.record.name} builds with {key}={bool(value)}, a kernel dispatched "
                                 f"before with {self.config[str(key)]}")
        self.config.update({str(k): bool(v) for k, v in config.items()})

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        call = super().visit_call_(call)
        if not is_conv2d(call):
            return call
        try:
            layer = layer_of(call)
            name = f"conv2d {layer.workload('NCHW').shape} {layer.dtype}"
        except ValueError as err:
            self.notes.append(LayerNote("conv2d", reason=str(err)))
            return call
        try:
            kernel = self._kernel(layer)
            self._agree(kernel)
        except ValueError as err:
            self.notes.append(LayerNote(name, reason=str(err)))
            return call
        self.notes.append(LayerNote(name, kernel.describe()))
        return self._call(call, layer, kernel)

    def _call(self, call: relax.Call, layer: RelaxConv, kernel: ConvKernel) -> relax.Expr:
        data, weight = call.args
        wl = kernel.workload
        nhwc = wl.layout == "NHWC"
        if nhwc:
            data = self.builder_.emit(relax.op.permute_dims(data, TO_NHWC))
            weight = self.builder_.emit(relax.op.permute_dims(weight, TO_RSCK))
        gv = self.builder_.add_func(kernel.func, kernel.name)
        out = relax.call_tir(gv, [data, weight], relax.TensorType(wl.out_shape, wl.out_dtype))
        if nhwc:
            out = relax.op.permute_dims(self.builder_.emit(out), TO_NCHW)
        if layer.out_dtype != wl.out_dtype:
            out = relax.op.astype(self.builder_.emit(out), layer.out_dtype)
        return out


def dispatch_convs(mod: tvm.IRModule, target: tvm.target.Target,
                   choices: Choices | None = None) -> tuple[tvm.IRModule, list[LayerNote]]:
    """``mod`` with each conv the rules take rewritten (see the module docstring), and a note per conv."""
    dispatcher = _ConvDispatcher(mod, serial_for(target), choices)
    for gv, func in mod.functions_items():
        if isinstance(func, relax.Function):
            dispatcher.builder_.update_func(gv, dispatcher.visit_expr(func))
    return dispatcher.builder_.get(), dispatcher.notes


@tvm.transform.module_pass(opt_level=0, name="tirbench.DispatchConvRules")
class DispatchConvRules:
    """``dispatch_convs`` as a module pass; ``notes`` says what it did with each conv of the last module."""

    def __init__(self, target: tvm.target.Target, choices: Choices | None = None):
        self.target, self.choices = target, choices
        self.notes: list[LayerNote] = []

    def transform_module(self, mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        mod, self.notes = dispatch_convs(mod, self.target, self.choices)
        return mod


def pass_config_of(mod: tvm.IRModule) -> dict[str, bool]:
    """The PassContext config the dispatched kernels of ``mod`` build with (their ``tirbench.pass_config``)."""
    config: dict[str, bool] = {}
    for func in mod.functions.values():
        if isinstance(func, tvm.tirx.PrimFunc) and func.attrs is not None and "tirbench.pass_config" in func.attrs:
            config.update({str(k): bool(v) for k, v in func.attrs["tirbench.pass_config"].items()})
    return config
