"""The conv rules as a Relax pass: each ``relax.nn.conv2d`` the rules take becomes ``R.call_tir`` of the kernel they
choose for it (``kernels.choose_kernel``), as TVM's dispatch passes rewrite an op into calls of their own kernels;
a conv they refuse stays ``relax.nn.conv2d``, and TVM's default pipeline legalizes it and DLight schedules it.

Layout: float32 layers run on the NCHW families, float16 layers on the NHWC tensor-core families
(``kernels.LAYOUT``). A conv stored in another layout than its kernel's (``layer.LAYOUTS``: the model's NCHW, or
NHWC where ``ConvertLayout`` made the model NHWC between layers, ``pipeline.passes(nhwc=True)``) gets transposes
around its kernel: ``R.permute_dims`` of the data and of the output (and of a fused shortcut), each an extra pass
over device memory as many bytes as the activation (the weights' transpose folds into a constant where they are
bound constants, else it is one more pass); ``LayerNote.transposes`` counts the activations' ones. An fp16 model
made NHWC by ``ConvertLayout`` has none around its fp16 layers: its transposes are ConvertLayout's, at its ends.
A float16 layer the model writes as float32 (``ToMixedPrecision(out_dtype="float32")``) gets its kernel's float16
output cast (``R.astype``): one more rounding than the model asked for, what cuDNN's fp16 convolution does.

Epilogues (issue 44): a conv followed by + bias, + residual and ReLU, in that order, each optional
(``epilogue.find_chains``: TVM's conv patterns, each value inside the chain read by the chain alone), becomes ONE
kernel: the family and parameters chosen for the conv alone, applied to the layer's workload with that epilogue
(``workloads.conv2d(..., bias=, residual=, relu=)``), whose epilogue block is then inlined into the family's store
(``schedules.conv.epilogue``; ``kernels.with_epilogue``). Every family the pass dispatches takes it (split-K in
its second kernel, which sums the slices). The bias goes in as (K,) (``R.reshape``: folded for a constant, a copy
of K values for a parameter); on the NHWC families the residual is transposed first (one pass over it, which the
separate add would have made too). The epilogue stays separate Relax ops, which ``FuseOps`` makes a kernel of their
own (``fused_add_relu``: one more pass over the output), where the family's store refuses it (its line in the
layer's ``LayerNote``) and where the layer writes another dtype than its kernel (a float16 conv written as float32:
the model adds a float32 bias to the cast output). A conv left to DLight keeps its chain: ``FuseOps`` fuses the
legalized conv with it.

All dispatched kernels build in one ``tvm.compile`` under one PassContext (``pass_config_of``): a layer whose
family's config (``kernels.build_config``) contradicts one already dispatched stays ``relax.nn.conv2d``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from tirbench.bench.choose import Choices
from tirbench.compile.epilogue import Chain, find_chains
from tirbench.compile.kernels import LAYOUT, ConvKernel, choose_kernel, with_epilogue
from tirbench.compile.layer import RelaxConv, is_conv2d, layer_of
from tirbench.core.gpu import current_gpu
from tirbench.workloads.conv2d import ConvEpilogue

#: Transposes of an activation and of a filter from a layer's layout to a kernel's (``layer.LAYOUTS``: NCHW with
#: OIHW filters, NHWC with HWIO filters, the NHWC families' (R, S, C, K)).
ACTIVATION_PERM = {("NCHW", "NHWC"): (0, 2, 3, 1), ("NHWC", "NCHW"): (0, 3, 1, 2)}
FILTER_PERM = {("NCHW", "NHWC"): (2, 3, 1, 0), ("NHWC", "NCHW"): (3, 2, 0, 1)}


@dataclass(frozen=True)
class LayerNote:
    """What the pass did with one conv: the kernel it called (``kernel``), or why it left the conv (``reason``);
    the epilogue after it (``epilogue``, ``ConvEpilogue.tag``) and why it stays separate (``apart``; "" where the
    kernel stores it: "conv2d <shape> float32 + bias_relu: nchw_splitk{...} (rules)"); ``transposes``: the
    activations the pass transposes around the kernel (data, output, fused shortcut; 0 where the layer's layout is
    the kernel's)."""

    layer: str
    kernel: str | None = None
    reason: str = ""
    epilogue: str = ""
    apart: str = ""
    transposes: int = 0

    def __str__(self) -> str:
        if not self.kernel:
            return f"{self.layer}: left to DLight ({self.reason})"
        if not self.epilogue:
            return f"{self.layer}: {self.kernel}"
        if not self.apart:
            return f"{self.layer} + {self.epilogue}: {self.kernel}"
        return f"{self.layer}: {self.kernel}; {self.epilogue} left to FuseOps ({self.apart})"


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
        self.kernels: dict[tuple[str, str, str], ConvKernel | str] = {}
        self.heads: dict[relax.Call, Chain] = {}
        self.fused: dict[relax.Call, tuple[Chain, ConvKernel]] = {}

    def rewrite(self, func: relax.Function) -> relax.Function:
        """``func`` with its convs dispatched and what a fused chain replaced removed."""
        self.heads = {chain.conv: chain for chain in find_chains(func)}
        return relax.analysis.remove_all_unused(self.visit_expr(func))

    def _cached(self, key: tuple[str, str, str], make: Callable[[], ConvKernel]) -> ConvKernel:
        if key not in self.kernels:
            try:
                self.kernels[key] = make()
            except ValueError as err:
                self.kernels[key] = str(err)
        if isinstance(self.kernels[key], str):
            raise ValueError(self.kernels[key])
        return self.kernels[key]

    def _kernel(self, layer: RelaxConv) -> ConvKernel:
        wl = layer.workload(LAYOUT[layer.dtype])
        return self._cached((wl.shape, wl.dtype, ""), lambda: choose_kernel(wl, choices=self.choices,
                                                                           serial=self.serial))

    def _fused_kernel(self, layer: RelaxConv, kernel: ConvKernel, epilogue: ConvEpilogue) -> ConvKernel:
        """``kernel`` with ``epilogue`` fused into its store; a one-line ValueError where it cannot be."""
        if layer.out_dtype != kernel.workload.out_dtype:
            raise ValueError(f"the layer writes {layer.out_dtype}, its kernel {kernel.workload.out_dtype}")
        wl = layer.workload(kernel.workload.layout, epilogue)
        return self._cached((wl.shape, wl.dtype, epilogue.tag),
                            lambda: with_epilogue(kernel, wl, epilogue, serial=self.serial))

    def _agree(self, kernel: ConvKernel) -> None:
        config = kernel.func.attrs["tirbench.pass_config"]
        for key, value in config.items():
            if self.config.get(str(key), bool(value)) != bool(value):
                raise ValueError(f"{kernel.record.name} builds with {key}={bool(value)}, a kernel dispatched "
                                 f"before with {self.config[str(key)]}")
        self.config.update({str(k): bool(v) for k, v in config.items()})

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        new = super().visit_call_(call)
        if call in self.fused:    # the end of a chain whose conv got a fused kernel
            return self._call(*self.fused[call])
        if not is_conv2d(new):
            return new
        note, kernel = self._choose(new, self.heads.get(call))
        self.notes.append(note)
        if kernel is None or (note.epilogue and not note.apart):
            return new            # left to DLight, or unused once its chain's end is replaced (``rewrite``)
        return self._call(Chain(call, call, ConvEpilogue()), kernel)

    def _choose(self, conv: relax.Call, chain: Chain | None) -> tuple[LayerNote, ConvKernel | None]:
        """The note on ``conv`` and its kernel (None where it is left to DLight); where ``chain`` (the chain it
        heads) fuses, the fused kernel waits for the chain's end (``fused``)."""
        try:
            layer = layer_of(conv)
            name = f"conv2d {layer.workload('NCHW').shape} {layer.dtype}"
        except ValueError as err:
            return LayerNote("conv2d", reason=str(err)), None
        try:
            kernel = self._kernel(layer)
            self._agree(kernel)
        except ValueError as err:
            return LayerNote(name, reason=str(err)), None
        moved = 2 if layer.layout != kernel.workload.layout else 0   # its data and output
        if chain is None:
            return LayerNote(name, kernel.describe(), transposes=moved), kernel
        try:
            self.fused[chain.end] = (chain, self._fused_kernel(layer, kernel, chain.epilogue))
        except ValueError as err:
            return LayerNote(name, kernel.describe(), epilogue=chain.epilogue.tag, apart=str(err),
                             transposes=moved), kernel
        moved += 1 if moved and chain.epilogue.residual else 0
        return LayerNote(name, kernel.describe(), epilogue=chain.epilogue.tag, transposes=moved), kernel

    def _call(self, chain: Chain, kernel: ConvKernel) -> relax.Expr:
        """The call of ``kernel`` on ``chain``'s conv operands and epilogue inputs, between the transposes from the
        layer's layout to the kernel's and back (and the cast of a float16 kernel the model writes as float32)."""
        data, weight = (self.visit_expr(arg) for arg in chain.conv.args)
        wl = kernel.workload
        there = (str(chain.conv.attrs.data_layout), wl.layout)   # (the layer's layout, the kernel's)
        moved = there[0] != there[1]
        if moved:
            data = self.builder_.emit(relax.op.permute_dims(data, ACTIVATION_PERM[there]))
            weight = self.builder_.emit(relax.op.permute_dims(weight, FILTER_PERM[there]))
        args = [data, weight]
        if chain.bias is not None:
            args.append(self.builder_.emit(relax.op.reshape(self.visit_expr(chain.bias), (wl.sizes["k"],))))
        if chain.residual is not None:
            residual = self.visit_expr(chain.residual)
            args.append(self.builder_.emit(relax.op.permute_dims(residual, ACTIVATION_PERM[there])) if moved
                        else residual)
        gv = self.builder_.add_func(kernel.func, kernel.name)
        out = relax.call_tir(gv, args, relax.TensorType(wl.out_shape, wl.out_dtype))
        if moved:
            out = relax.op.permute_dims(self.builder_.emit(out), ACTIVATION_PERM[there[::-1]])
        out_dtype = str(chain.end.ty.dtype)
        if out_dtype != wl.out_dtype:
            out = relax.op.astype(self.builder_.emit(out), out_dtype)
        return out


def dispatch_convs(mod: tvm.IRModule, target: tvm.target.Target,
                   choices: Choices | None = None) -> tuple[tvm.IRModule, list[LayerNote]]:
    """``mod`` with each conv the rules take rewritten (see the module docstring), and a note per conv."""
    dispatcher = _ConvDispatcher(mod, serial_for(target), choices)
    for gv, func in mod.functions_items():
        if isinstance(func, relax.Function):
            dispatcher.builder_.update_func(gv, dispatcher.rewrite(func))
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
