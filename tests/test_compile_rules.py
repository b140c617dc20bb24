"""The conv rules inside a Relax compile (``tirbench.compile``, issue 44): the convs the rules take become
``R.call_tir`` of their kernels (NCHW fp32; fp16 on the NHWC tensor-core families between transposes), each with the
epilogue after it (bias, residual, ReLU) fused into its store, a conv they refuse stays ``relax.nn.conv2d`` for
DLight with its epilogue, the whole module compiles for sm_90a and sm_80 (CUDA checked by nvcc), and on llvm the
model and each dispatched kernel match the float64 reference."""
from __future__ import annotations

import re

import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R

from tirbench.bench.choose import Choice, Choices, families_offered
from tirbench.bench.harness import run_checked
from tirbench.compile.dispatch import dispatch_convs, pass_config_of
from tirbench.compile.pipeline import compile_model, compile_passed, count_ops, passes
from tirbench.core.build import build
from tirbench.core.cuda_source import nvcc_report
from tirbench.core.gpu import ARCH_ENV
from tirbench.core.machine import cpu_target, target_for
from tirbench.schedules.conv.rules import rule_records
from tirbench.workloads import conv2d
from tirbench.workloads.conv2d import conv2d_reference
from tirbench.workloads.conv_geometry import parse_conv_shape


@pytest.fixture(autouse=True)
def _default_build(monkeypatch):
    """No GPU and no ``TIRBENCH_ARCH`` unless a test sets it (the rules read the build's arch)."""
    monkeypatch.delenv(ARCH_ENV, raising=False)
    monkeypatch.setenv("TIRBENCH_FORCE_CPU", "1")


@I.ir_module
class Fp32:
    """A 3x3 conv + bias + ReLU, a 1x1, and a grouped 3x3 (groups 3 of one output channel each: no family takes
    it, so the rules refuse it)."""

    @R.function
    def main(x: R.Tensor((1, 16, 14, 14), "float32"), w1: R.Tensor((32, 16, 3, 3), "float32"),
             b1: R.Tensor((1, 32, 1, 1), "float32"), w2: R.Tensor((24, 32, 1, 1), "float32"),
             w3: R.Tensor((3, 8, 3, 3), "float32")) -> R.Tensor((1, 3, 14, 14), "float32"):
        with R.dataflow():
            y1 = R.nn.relu(R.add(R.nn.conv2d(x, w1, strides=1, padding=1), b1))
            y2 = R.nn.conv2d(y1, w2)
            y3 = R.nn.conv2d(y2, w3, padding=1, groups=3)
            R.output(y3)
        return y3


@I.ir_module
class Fp16:
    """An fp16 3x3 conv + bias + ReLU written as float16, and a 1x1 written as float32 (ToMixedPrecision's form)."""

    @R.function
    def main(x: R.Tensor((2, 64, 14, 14), "float16"), w1: R.Tensor((64, 64, 3, 3), "float16"),
             b1: R.Tensor((1, 64, 1, 1), "float16"),
             w2: R.Tensor((128, 64, 1, 1), "float16")) -> R.Tensor((2, 128, 14, 14), "float32"):
        with R.dataflow():
            y1 = R.nn.relu(R.add(R.nn.conv2d(x, w1, padding=1, out_dtype="float16"), b1))
            y2 = R.nn.conv2d(y1, w2, out_dtype="float32")
            R.output(y2)
        return y2


@I.ir_module
class Chains:
    """A ResNet-like run of float32 layers, each conv with another epilogue: none, a bias, bias + ReLU, bias +
    shortcut + ReLU (the shortcut y2 also feeds the next conv), a grouped conv (4 groups) with bias + ReLU, and a
    grouped conv the rules refuse (3 groups of one output channel) with bias + ReLU."""

    @R.function
    def main(x: R.Tensor((1, 16, 14, 14), "float32"), w1: R.Tensor((16, 16, 3, 3), "float32"),
             w2: R.Tensor((16, 16, 1, 1), "float32"), b2: R.Tensor((1, 16, 1, 1), "float32"),
             w3: R.Tensor((16, 16, 3, 3), "float32"), b3: R.Tensor((1, 16, 1, 1), "float32"),
             w4: R.Tensor((16, 16, 3, 3), "float32"), b4: R.Tensor((1, 16, 1, 1), "float32"),
             w5: R.Tensor((24, 4, 3, 3), "float32"), b5: R.Tensor((1, 24, 1, 1), "float32"),
             w6: R.Tensor((3, 8, 3, 3), "float32"),
             b6: R.Tensor((1, 3, 1, 1), "float32")) -> R.Tensor((1, 3, 14, 14), "float32"):
        with R.dataflow():
            y1 = R.nn.conv2d(x, w1, padding=1)
            y2 = R.add(R.nn.conv2d(y1, w2), b2)
            y3 = R.nn.relu(R.add(R.nn.conv2d(y2, w3, padding=1), b3))
            y4 = R.nn.relu(R.add(R.add(R.nn.conv2d(y3, w4, padding=1), b4), y2))
            y5 = R.nn.relu(R.add(R.nn.conv2d(y4, w5, padding=1, groups=4), b5))
            y6 = R.nn.relu(R.add(R.nn.conv2d(y5, w6, padding=1, groups=3), b6))
            R.output(y6)
        return y6


def chains_reference(x, w1, w2, b2, w3, b3, w4, b4, w5, b5, w6, b6) -> np.ndarray:
    """``Chains`` in float64."""
    def conv(v, w, groups=1):
        return conv2d_reference(v, w, stride=1, pad=w.shape[2] // 2, groups=groups)

    y2 = conv(conv(x, w1), w2) + b2
    y4 = np.maximum(conv(np.maximum(conv(y2, w3) + b3, 0), w4) + b4 + y2, 0)
    return np.maximum(conv(np.maximum(conv(y4, w5, 4) + b5, 0), w6, 3) + b6, 0)


#: The epilogue each of ``Chains``' dispatched kernels ends its name with, in order, and its arguments.
CHAIN_TAGS = [("", 2), ("_bias", 3), ("_bias_relu", 3), ("_bias_residual_relu", 4), ("_g4_bias_relu", 3)]


def calls(mod: tvm.IRModule, name: str) -> list[relax.Call]:
    found = []
    relax.analysis.post_order_visit(
        mod["main"], lambda e: found.append(e) if isinstance(e, relax.Call) and getattr(e.op, "name", "") == name
        else None)
    return found


def kernels(mod: tvm.IRModule) -> dict[str, tvm.tirx.PrimFunc]:
    """The dispatched PrimFuncs by name."""
    return {gv.name_hint: f for gv, f in mod.functions_items()
            if isinstance(f, tvm.tirx.PrimFunc) and "tirbench.kernel" in f.attrs}


def cuda_of(ex: tvm.runtime.Executable) -> str:
    (host,) = ex.mod.imports
    return next(m for m in host.imports if m.kind == "cuda").inspect_source()


def workload_of(name: str):
    """The workload of a dispatched NCHW kernel, from its name: ``<family>_<shape>[_<epilogue tag>]``."""
    shape, tag = re.search(r"_(\d+x[^_]+(?:_[gdsp][\dx]+)*)((?:_(?:bias|residual|relu))*)$", name).groups()
    return conv2d(**parse_conv_shape(shape), **{op: True for op in tag.split("_") if op})


def kernel_source(src: str, name: str) -> str:
    """The CUDA of the kernels TVM made from the PrimFunc ``name`` (``<name>_kernel``, ``<name>_kernel_1``, ...)."""
    parts = re.split(r'(?=extern "C" __global__)', src)
    return "".join(p for p in parts if re.match(rf'[^;{{]*\b{re.escape(name)}_kernel(_\d+)?\([^;]*\{{', p))


def test_the_pass_calls_the_rules_kernels_marked_for_relax_and_leaves_the_refused_conv():
    mod, notes = dispatch_convs(Fp32, target_for("sm_90a"))
    funcs = kernels(mod)
    assert sorted(funcs) == ["nchw_splitk_1x16x14x14x32x3x3x1x1_bias_relu", "nchw_splitk_1x32x14x14x24x1x1x1x0"]
    assert len(calls(mod, "relax.call_tir")) == 2
    assert not calls(mod, "relax.add") and not calls(mod, "relax.nn.relu")   # the first conv's, in its kernel
    (left,) = calls(mod, "relax.nn.conv2d")   # the grouped conv, refused in rule_records' own line
    assert int(left.attrs.groups) == 3
    refused = conv2d(1, 24, 14, 14, 3, 3, 3, 1, 1, groups=3)
    with pytest.raises(ValueError) as err:
        rule_records(refused)
    assert str(notes[2]) == f"conv2d {refused.shape} float32: left to DLight ({err.value})"
    assert all(str(n).endswith("(rules)") and "nchw_splitk{" in str(n) for n in notes[:2])
    assert str(notes[0]).startswith("conv2d 1x16x14x14x32x3x3x1x1 float32 + bias_relu: nchw_splitk{")
    for func in funcs.values():   # DLight skips it, FuseOps fuses nothing into it, Relax names it
        assert bool(func.attrs["tirx.is_scheduled"]) and int(func.attrs["op_pattern"]) == 8
        assert "global_symbol" not in func.attrs and bool(func.attrs["tirx.noalias"])


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_the_model_compiles_for_the_gpu_with_the_rules_kernels_and_dlights(monkeypatch, arch):
    """Code generation only (no GPU): the split-K kernels (partial sums, then their sum, which adds the bias and
    takes the ReLU) beside DLight's conv2d, and no kernel of their own for the bias and ReLU; nvcc compiles the whole
    CUDA for the arch."""
    monkeypatch.setenv(ARCH_ENV, arch)
    src = cuda_of(compile_model(Fp32, target_for(arch)))
    for name in ("nchw_splitk_1x16x14x14x32x3x3x1x1_bias_relu", "nchw_splitk_1x32x14x14x24x1x1x1x0"):
        ours = kernel_source(src, name)
        assert ours.count("__global__") == 2 and "_rf" in ours, name
    assert "Bias_ptr" in kernel_source(src, "nchw_splitk_1x16x14x14x32x3x3x1x1_bias_relu")
    assert kernel_source(src, "conv2d") and not re.search(r"fused_\w*(add|relu)\w*_kernel", src)
    assert any("registers" in line for line in nvcc_report(src, arch))


def test_without_the_rules_every_conv_goes_to_dlight():
    assert passes(Fp32, target_for("sm_90a"), rules=False) == []
    src = cuda_of(compile_model(Fp32, target_for("sm_90a"), rules=False))
    assert "Y_rf" not in src and "nchw_splitk" not in src


def test_on_llvm_the_model_and_each_dispatched_kernel_match_float64(rng):
    """The rules' kernels without thread bindings (``core.serial``), run by Relax's VM on llvm; and each dispatched
    PrimFunc alone, checked against its workload's reference (``harness.run_checked``)."""
    ex = compile_model(Fp32, cpu_target())
    args = [rng.standard_normal([int(d) for d in p.ty.shape.values]).astype("float32") for p in Fp32["main"].params]
    out = relax.VirtualMachine(ex, tvm.cpu())["main"](*map(tvm.runtime.tensor, args)).numpy()
    x, w1, b1, w2, w3 = args
    ref = np.maximum(conv2d_reference(x, w1, stride=1, pad=1) + b1, 0)
    ref = conv2d_reference(conv2d_reference(ref, w2, stride=1, pad=0), w3, stride=1, pad=1, groups=3)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())
    mod, _ = dispatch_convs(Fp32, cpu_target())
    for name, func in kernels(mod).items():
        run_checked(workload_of(name), build(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                                             cpu_target()), tvm.cpu(0), what=name)


@pytest.mark.parametrize("arch,marker", [("sm_90a", r"wgmma\w*_mma_async"), ("sm_80", r"mma\.sync\.aligned\.m16n8k16")])
def test_fp16_layers_run_on_the_nhwc_tensor_core_families_between_transposes(monkeypatch, arch, marker):
    monkeypatch.setenv(ARCH_ENV, arch)
    mod, notes = dispatch_convs(Fp16, target_for(arch))
    family = "nhwc_wgmma" if arch == "sm_90a" else "nhwc_mma"
    assert sorted(kernels(mod)) == [f"{family}_2x64x14x14x128x1x1x1x0",
                                    f"{family}_2x64x14x14x64x3x3x1x1_bias_relu"], notes
    assert not calls(mod, "relax.nn.conv2d")
    assert len(calls(mod, "relax.permute_dims")) == 6   # data, weights and output of each layer
    (cast,) = calls(mod, "relax.astype")                  # the layer the model writes as float32
    assert str(cast.ty.dtype) == "float32"
    assert pass_config_of(mod) == {"tirx.use_async_copy": True, "tirx.disable_storage_rewrite": False}
    src = cuda_of(compile_model(mod, target_for(arch)))   # already dispatched: the pass finds no conv left
    for name in kernels(mod):
        assert re.search(marker, kernel_source(src, name)), name   # wgmma: through TVM's inline-asm helper
    assert any("registers" in line for line in nvcc_report(src, arch))


def test_the_pass_fuses_each_epilogue_chain_into_its_conv_kernel_and_leaves_the_refused_chain():
    mod, notes = dispatch_convs(Chains, target_for("sm_90a"))
    dispatched = calls(mod, "relax.call_tir")
    tags = [re.search(r"((?:_g\d+)?(?:_bias|_residual|_relu)*)$", call.args[0].name_hint).group(1)
            for call in dispatched]
    assert list(zip(tags, (len(call.args[1].fields) for call in dispatched))) == CHAIN_TAGS
    assert dispatched[4].args[0].name_hint.startswith("nchw_grouped_gemm_1x16x14x14x24x3x3x1x1_g4")
    shortcut = dispatched[3].args[1].fields[3]   # the residual: the bias layer's kernel output, y2
    assert shortcut.same_as(mod["main"].body.blocks[0].bindings[2].var)
    (left,) = calls(mod, "relax.nn.conv2d")   # the refused conv, its bias and ReLU beside it for FuseOps
    assert int(left.attrs.groups) == 3 and len(calls(mod, "relax.add")) == len(calls(mod, "relax.nn.relu")) == 1
    assert [str(n).split(": ")[0] for n in notes] == [
        "conv2d 1x16x14x14x16x3x3x1x1 float32", "conv2d 1x16x14x14x16x1x1x1x0 float32 + bias",
        "conv2d 1x16x14x14x16x3x3x1x1 float32 + bias_relu", "conv2d 1x16x14x14x16x3x3x1x1 float32 + bias_residual_relu",
        "conv2d 1x16x14x14x24x3x3x1x1_g4 float32 + bias_relu", "conv2d 1x24x14x14x3x3x3x1x1_g3 float32"]
    assert "left to DLight (conv rules: no family takes" in str(notes[-1])


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_the_fused_kernels_build_for_the_gpu(monkeypatch, arch):
    """Each fused kernel reads the bias (and the shortcut) and stores max(..., 0) itself; the refused conv goes
    to DLight with its epilogue fused by FuseOps; nvcc compiles the whole CUDA for the arch."""
    monkeypatch.setenv(ARCH_ENV, arch)
    mod, _ = dispatch_convs(Chains, target_for(arch))
    src = cuda_of(compile_model(mod, target_for(arch)))
    for name in kernels(mod):
        ours = kernel_source(src, name)
        assert ours and ("Bias_ptr" in ours) == ("_bias" in name) and ("Res_ptr" in ours) == ("residual" in name)
        assert ("max(" in ours) == name.endswith("relu"), name
    assert re.search(r"fused_conv2d\w*_add\w*_relu\w*_kernel", src)
    assert any("registers" in line for line in nvcc_report(src, arch))


def test_on_llvm_the_fused_kernels_match_float64(rng):
    ex = compile_model(Chains, cpu_target())
    args = [rng.standard_normal([int(d) for d in p.ty.shape.values]).astype("float32") for p in Chains["main"].params]
    out = relax.VirtualMachine(ex, tvm.cpu())["main"](*map(tvm.runtime.tensor, args)).numpy()
    ref = chains_reference(*args)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())
    mod, _ = dispatch_convs(Chains, cpu_target())
    for name, func in kernels(mod).items():
        run_checked(workload_of(name), build(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                                             cpu_target()), tvm.cpu(0), what=name)


@I.ir_module
class ResFp16:
    """A float16 3x3 conv + bias + shortcut + ReLU, and a 1x1 written as float32 with a float32 bias + ReLU
    (``ToMixedPrecision(out_dtype="float32")``'s form)."""

    @R.function
    def main(x: R.Tensor((2, 64, 14, 14), "float16"), w1: R.Tensor((64, 64, 3, 3), "float16"),
             b1: R.Tensor((1, 64, 1, 1), "float16"), w2: R.Tensor((64, 64, 1, 1), "float16"),
             b2: R.Tensor((1, 64, 1, 1), "float32")) -> R.Tensor((2, 64, 14, 14), "float32"):
        with R.dataflow():
            y1 = R.nn.relu(R.add(R.add(R.nn.conv2d(x, w1, padding=1, out_dtype="float16"), b1), x))
            y2 = R.nn.relu(R.add(R.nn.conv2d(y1, w2, out_dtype="float32"), b2))
            R.output(y2)
        return y2


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_fp16_chains_fuse_on_the_nhwc_families_unless_the_layer_writes_float32(monkeypatch, arch):
    """The shortcut goes in NHWC (one more transpose); the 1x1 written as float32 keeps its epilogue apart (its
    kernel writes float16, the model adds the bias to the float32 cast)."""
    monkeypatch.setenv(ARCH_ENV, arch)
    mod, notes = dispatch_convs(ResFp16, target_for(arch))
    family = "nhwc_wgmma" if arch == "sm_90a" else "nhwc_mma"
    assert sorted(kernels(mod)) == [f"{family}_2x64x14x14x64x1x1x1x0",
                                    f"{family}_2x64x14x14x64x3x3x1x1_bias_residual_relu"], notes
    assert str(notes[0]).startswith(f"conv2d 2x64x14x14x64x3x3x1x1 float16 + bias_residual_relu: {family}{{")
    assert str(notes[1]).endswith("; bias_relu left to FuseOps (the layer writes float32, its kernel float16)")
    assert len(calls(mod, "relax.permute_dims")) == 7   # data, weights, shortcut and output; data, weights, output
    assert len(calls(mod, "relax.add")) == len(calls(mod, "relax.nn.relu")) == 1
    src = cuda_of(compile_model(mod, target_for(arch)))
    ours = kernel_source(src, f"{family}_2x64x14x14x64x3x3x1x1_bias_residual_relu")
    assert "Bias_ptr" in ours and "Res_ptr" in ours and "max(" in ours
    assert any("registers" in line for line in nvcc_report(src, arch))


def test_a_folded_batch_norm_fuses_with_the_shortcut_and_relu_and_matches_on_llvm(rng):
    """ResNet's ``relu(bn(conv(x)) + x)`` with constant weights: ``FoldBatchnormToConv2D`` and ``FoldConstant``
    leave the conv and a constant bias, and the whole block becomes one kernel, its bias folded to (K,)."""
    w = rng.standard_normal((16, 16, 3, 3)).astype("float32")
    gamma, beta, mean, var = (rng.uniform(0.5, 1.5, 16).astype("float32") for _ in range(4))

    @I.ir_module
    class Block:
        @R.function
        def main(x: R.Tensor((1, 16, 14, 14), "float32")) -> R.Tensor((1, 16, 14, 14), "float32"):
            with R.dataflow():
                bn = R.nn.batch_norm(R.nn.conv2d(x, R.const(w), padding=1), R.const(gamma), R.const(beta),
                                     R.const(mean), R.const(var), axis=1)
                y = R.nn.relu(R.add(bn[0], x))
                R.output(y)
            return y

    with cpu_target():
        mod = tvm.transform.Sequential(passes(Block, cpu_target()))(Block)
    (call,) = calls(mod, "relax.call_tir")
    assert call.args[0].name_hint.endswith("_bias_residual_relu") and calls(mod, "relax.call_tir") == [call]
    bias = call.args[1].fields[2]
    assert isinstance(bias, tvm.ir.expr.Constant) and str(bias.ty) == 'R.Tensor((16,), dtype="float32")'
    x = rng.standard_normal((1, 16, 14, 14)).astype("float32")
    out = relax.VirtualMachine(compile_model(Block, cpu_target()), tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    scale = (gamma / np.sqrt(var.astype(np.float64) + 1e-5)).reshape(1, -1, 1, 1)
    ref = (conv2d_reference(x, w, stride=1, pad=1) - mean.reshape(1, -1, 1, 1)) * scale + beta.reshape(1, -1, 1, 1)
    np.testing.assert_allclose(out, np.maximum(ref + x, 0), rtol=1e-4, atol=1e-4)


def test_a_value_the_function_reads_elsewhere_is_not_fused_away():
    @I.ir_module
    class Shared:
        @R.function
        def main(x: R.Tensor((1, 16, 14, 14), "float32"), w: R.Tensor((16, 16, 3, 3), "float32"),
                 b: R.Tensor((1, 16, 1, 1), "float32")) -> R.Tensor((1, 16, 14, 14), "float32"):
            with R.dataflow():
                a = R.add(R.nn.conv2d(x, w, padding=1), b)   # read by the ReLU and by z: the chain ends here
                z = R.add(R.nn.relu(a), a)
                c = R.nn.conv2d(z, w, padding=1)             # read by the ReLU and by the output: no chain
                y = R.add(R.nn.relu(c), c)
                R.output(y)
            return y

    mod, notes = dispatch_convs(Shared, target_for("sm_90a"))
    assert sorted(kernels(mod)) == ["nchw_splitk_1x16x14x14x16x3x3x1x1", "nchw_splitk_1x16x14x14x16x3x3x1x1_bias"]
    assert len(calls(mod, "relax.add")) == 2 and len(calls(mod, "relax.nn.relu")) == 2
    assert [n.epilogue for n in notes] == ["bias", ""]


def test_a_recorded_choice_is_used_where_the_rules_still_offer_it(tmp_path):
    wl = conv2d(1, 16, 14, 14, 32, 3, 3, 1, 1)
    gemm_family = rule_records(wl)[1]
    assert gemm_family.name == "nchw_gemm"
    choices = Choices(tmp_path / "choices.csv")
    choices.remember(wl, Choice("nchw_gemm", dict(gemm_family.candidates[1]), 1.0, families=families_offered(wl)),
                     "NVIDIA H100 80GB HBM3")
    mod, notes = dispatch_convs(Fp32, target_for("sm_90a"), choices)
    assert str(notes[0]).endswith("(recorded)") and "nchw_gemm{" in str(notes[0])
    assert str(notes[1]).endswith("(rules)")   # no recorded choice for the 1x1
    assert pass_config_of(mod) == {"tirx.use_async_copy": True, "tirx.disable_storage_rewrite": True}
    src = cuda_of(compile_model(mod, target_for("sm_90a")))
    assert "cp_async" in kernel_source(src, f"nchw_gemm_{wl.shape}_bias_relu")


def test_bad_input_is_one_line():
    with pytest.raises(ValueError, match=r"^compile_model takes an IRModule with a Relax function main, not str$"):
        compile_model("resnet", target_for("sm_90a"))
    with pytest.raises(ValueError, match=r"^target arch sm_80, but the rules build for sm_90a: set "
                                         r"TIRBENCH_ARCH=sm_80$"):
        compile_model(Fp32, target_for("sm_80"))
    with pytest.raises(ValueError, match=r"^the conv rules build for cuda or llvm targets, not vulkan$"):
        compile_model(Fp32, {"kind": "vulkan"})
    with pytest.raises(ValueError, match=r"^target 'no-such-target' is not a TVM target: ") as err:
        compile_model(Fp32, "no-such-target")
    assert "\n" not in str(err.value)


def test_a_conv_the_suite_cannot_state_is_left_with_its_reason():
    @I.ir_module
    class Nhwc:
        @R.function
        def main(x: R.Tensor((1, 14, 14, 16), "float32"),
                 w: R.Tensor((32, 3, 3, 16), "float32")) -> R.Tensor((1, 14, 14, 32), "float32"):
            with R.dataflow():
                y = R.nn.conv2d(x, w, padding=1, data_layout="NHWC", kernel_layout="OHWI")
                R.output(y)
            return y

    mod, (note,) = dispatch_convs(Nhwc, target_for("sm_90a"))
    assert str(note) == "conv2d: left to DLight (conv2d takes NCHW data, OIHW weights and an NCHW output, or " \
                        "NHWC/HWIO/NHWC here, not NHWC/OHWI/NHWC)"
    assert len(calls(mod, "relax.nn.conv2d")) == 1


def test_batch_norms_are_folded_first():
    @I.ir_module
    class WithBn:
        @R.function
        def main(x: R.Tensor((1, 16, 14, 14), "float32")) -> R.Tensor((1, 16, 14, 14), "float32"):
            with R.dataflow():
                y = R.nn.batch_norm(x, R.const(np.ones(16, "float32")), R.const(np.zeros(16, "float32")),
                                    R.const(np.zeros(16, "float32")), R.const(np.ones(16, "float32")), axis=1)
                R.output(y)
            return y[0]

    names = [p.info.name for p in passes(WithBn, target_for("sm_90a"))]
    assert names[:2] == ["FoldBatchnormToConv2D", "FoldConstant"] and names[2] == "tirbench.DispatchConvRules"
    assert [p.info.name for p in passes(Fp32, target_for("sm_90a"))] == ["tirbench.DispatchConvRules",
                                                                         "FoldConstant"]


@I.ir_module
class Fp32Block:
    """An exported model's form: float32, batch norms, a shortcut, ReLU6 (``R.clip``), a head that is no conv."""

    @R.function
    def main(x: R.Tensor((2, 64, 14, 14), "float32"), w1: R.Tensor((64, 64, 1, 1), "float32"),
             w2: R.Tensor((64, 64, 1, 1), "float32"), g: R.Tensor((64,), "float32"),
             b: R.Tensor((64,), "float32")) -> R.Tensor((2, 64), "float32"):
        with R.dataflow():
            y1 = R.nn.relu(R.nn.batch_norm(R.nn.conv2d(x, w1), g, b, b, g, axis=1)[0])
            y2 = R.nn.relu(R.add(R.nn.batch_norm(R.nn.conv2d(y1, w2), g, b, b, g, axis=1)[0], y1))
            y = R.mean(R.clip(y2, R.prim_value(0.0), R.prim_value(6.0)), axis=[2, 3])
            R.output(y)
        return y


def _bound(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with its weights and batch-norm parameters bound as constants, as the exported models have them."""
    rng = np.random.default_rng(0)
    params = {p: rng.uniform(0.5, 1.5, [int(d) for d in p.ty.shape.values]).astype("float32")
              for p in mod["main"].params[1:]}
    return relax.transform.BindParams("main", params)(mod)


def test_fp16_passes_make_fp16_convs_the_tensor_core_families_take(monkeypatch):
    """``passes(fp16=True)``: batch norms folded, ReLU6 as min/max, every conv float16 in; without the rules (and
    ``nhwc``) each sums and writes float32, as TVM legalizes a float16 output to a float16 sum; with ``nhwc`` the model is NHWC between its layers and each conv goes to ``nhwc_mma`` (sm_80) with its
    epilogue and no transpose around it: one is left, at the model's input (the head's mean reads NHWC)."""
    monkeypatch.setenv(ARCH_ENV, "sm_80")
    mod, target = _bound(Fp32Block), target_for("sm_80")
    with target:
        nchw = tvm.transform.Sequential(passes(mod, target, rules=False, fp16=True))(mod)
        ps = passes(mod, target, fp16=True, nhwc=True)
        out = tvm.transform.Sequential(ps)(mod)
    convs = calls(nchw, "relax.nn.conv2d")
    assert [(str(c.args[0].ty.dtype), str(c.ty.dtype), str(c.attrs.data_layout)) for c in convs] == \
        [("float16", "float32", "NCHW")] * 2
    assert not calls(nchw, "relax.clip") and len(calls(nchw, "relax.minimum")) == 1
    assert not calls(nchw, "relax.nn.batch_norm")
    notes = ps[-2].notes
    assert [str(n).split(": ")[0] for n in notes] == ["conv2d 2x64x14x14x64x1x1x1x0 float16 + bias_relu",
                                                      "conv2d 2x64x14x14x64x1x1x1x0 float16 + bias_residual_relu"]
    assert all("nhwc_mma{" in str(n) for n in notes) and not calls(out, "relax.nn.conv2d")
    assert [n.transposes for n in notes] == [0, 0] and count_ops(out, "relax.permute_dims") == 1


def test_on_llvm_the_nhwc_model_matches_float64(rng):
    """``nhwc=True`` on float32 layers: ConvertLayout's NHWC convs read by ``layer_of``, the rules' NCHW kernels
    between transposes (their shortcut too), the refused grouped conv legalized in NHWC; same numbers as NCHW."""
    with cpu_target():
        ps = passes(Chains, cpu_target(), nhwc=True)
        mod = tvm.transform.Sequential(ps)(Chains)
    notes = ps[-2].notes
    assert [n.transposes for n in notes] == [2, 2, 2, 3, 2, 0] and notes[-1].kernel is None
    ex = compile_passed(mod, cpu_target())
    args = [rng.standard_normal([int(d) for d in p.ty.shape.values]).astype("float32") for p in Chains["main"].params]
    out = relax.VirtualMachine(ex, tvm.cpu())["main"](*map(tvm.runtime.tensor, args)).numpy()
    ref = chains_reference(*args)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())
