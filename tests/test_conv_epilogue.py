"""A conv layer's epilogue (bias, residual, ReLU) as part of its workload (``conv2d(..., bias=, residual=, relu=)``)
and fused into each kernel family's store (``schedules.conv.epilogue.fuse_epilogue``), issue 44: the workloads match
their float64 reference on llvm in every layout; every family the rules give float32 NCHW / NHWC and float16 NHWC
layers takes the epilogue into its store (no Yacc left in memory, every access of Bias and Res proven in bounds), its
kernels match the reference on llvm where they run there (no tensor cores), and nvcc takes the tensor-core ones;
a store that cannot take it is refused in one line."""
from __future__ import annotations

import re

import pytest
import tvm
from test_any_shape import unproven_accesses
from tvm import s_tir

from tirbench.bench.harness import run_checked
from tirbench.core.build import build
from tirbench.core.cuda_source import device_source, nvcc_report
from tirbench.core.machine import cpu_target
from tirbench.core.serial import without_threads
from tirbench.schedules.conv.epilogue import fuse_epilogue
from tirbench.schedules.conv.records import (DEPTHWISE_NCHW, DEPTHWISE_NHWC, NCHW_GEMM, NCHW_GROUPED_GEMM,
                                             NCHW_SPLITK, NHWC_GEMM, NHWC_GROUPED_GEMM, NHWC_MMA, NHWC_WGMMA,
                                             NHWC_WMMA)
from tirbench.workloads import conv2d

EPILOGUE = {"bias": True, "residual": True, "relu": True}
SPLITK = {"split": 2, "block_k": 16, "thread_k": 4, "block_pixels": (7, 7), "step": 8}
#: (family, layer, candidate): the fp32 batch-1 families (split-K, the implicit GEMMs, on a shape their tiles divide
#: and on one they pad), grouped and depthwise layers (fp32 NCHW, fp16 NHWC), and the fp16 NHWC tensor-core
#: families.
CASES = {
    "nchw_splitk": (NCHW_SPLITK, (1, 16, 14, 14, 32), {}, SPLITK),
    "nchw_gemm": (NCHW_GEMM, (1, 16, 14, 14, 32), {}, NCHW_GEMM.candidates[0]),
    "nchw_gemm_padded": (NCHW_GEMM, (1, 16, 13, 13, 30), {}, NCHW_GEMM.candidates[0]),
    "nchw_grouped_gemm": (NCHW_GROUPED_GEMM, (1, 32, 14, 14, 32), {"groups": 4}, NCHW_GROUPED_GEMM.candidates[1]),
    "depthwise_nchw": (DEPTHWISE_NCHW, (1, 16, 14, 14, 16), {"groups": 16}, DEPTHWISE_NCHW.candidates[3]),
    "nhwc_gemm": (NHWC_GEMM, (1, 16, 14, 14, 32), {"layout": "NHWC"}, NHWC_GEMM.candidates[0]),
    "depthwise_nhwc_fp16": (DEPTHWISE_NHWC, (1, 64, 14, 14, 64), {"groups": 64, "layout": "NHWC",
                                                                  "dtype": "float16"}, DEPTHWISE_NHWC.candidates[0]),
    "nhwc_grouped_gemm_fp16": (NHWC_GROUPED_GEMM, (2, 32, 7, 7, 32),
                               {"groups": 8, "layout": "NHWC", "dtype": "float16"}, NHWC_GROUPED_GEMM.candidates[0]),
    "nhwc_wgmma": (NHWC_WGMMA, (2, 64, 14, 14, 64), {"layout": "NHWC", "dtype": "float16"}, NHWC_WGMMA.candidates[5]),
    "nhwc_mma_padded": (NHWC_MMA, (2, 64, 13, 13, 60), {"layout": "NHWC", "dtype": "float16"},
                        NHWC_MMA.candidates[2]),
    "nhwc_wmma": (NHWC_WMMA, (2, 64, 14, 14, 64), {"layout": "NHWC", "dtype": "float16"}, NHWC_WMMA.candidates[2]),
}


def block_names(sch: s_tir.Schedule) -> list[str]:
    return [sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root"))]


@pytest.mark.parametrize("layout, dtype", [("NCHW", "float32"), ("NHWC", "float16"), ("HWCN", "float32")])
@pytest.mark.parametrize("ops", [("bias",), ("residual",), ("relu",), ("bias", "relu"), ("bias", "residual", "relu")],
                         ids="_".join)
def test_the_workload_with_an_epilogue_matches_float64_on_llvm(layout, dtype, ops):
    wl = conv2d(2, 8, 6, 6, 8, layout=layout, dtype=dtype, groups=2, **{op: True for op in ops})
    plain = conv2d(2, 8, 6, 6, 8, layout=layout, dtype=dtype, groups=2)
    run_checked(wl, build(wl.mod, cpu_target()), tvm.cpu(0), what="+".join(ops))
    names = [str(p.name) for p in wl.mod["main"].params]
    assert names == ["X", "W", *(n for n, op in (("Bias", "bias"), ("Res", "residual")) if op in ops), "Y"]
    assert (wl.name, wl.shape, wl.flops) == (plain.name, plain.shape, plain.flops)
    assert (wl.bytes > plain.bytes) == (ops != ("relu",))   # bias and residual are read
    blocks = block_names(s_tir.Schedule(wl.mod))
    # float16 takes its ReLU in "cast" (a float32 broadcast over 8 lanes is not CUDA TVM 0.27 can write)
    assert ("conv_epilogue" in blocks) == (ops != ("relu",) or dtype == "float32")


@pytest.mark.parametrize("case", CASES)
def test_each_family_stores_the_epilogue_from_its_accumulators(case):
    record, sizes, kwargs, cand = CASES[case]
    wl = conv2d(*sizes, **kwargs, **EPILOGUE)
    sch = fuse_epilogue(record.apply(wl, cand))
    assert "conv_epilogue" not in block_names(sch)
    with tvm.transform.PassContext(config=record.pass_config):
        src = device_source(sch)
    store_params = re.findall(r"_kernel(?:_\d+)?\(([^)]*)\)\s*\{", src)[-1]   # split-K: its second kernel
    assert "Bias_ptr" in store_params and "Res_ptr" in store_params and "Yacc_ptr" not in src   # from registers
    missed, checked = unproven_accesses(sch.mod, ("Bias", "Res", "Y"))
    assert checked >= 3 and not missed, missed[:3]
    if any(inst.kind.name == "Tensorize" for inst in sch.trace.insts):
        assert any("registers" in line for line in nvcc_report(src, "sm_90a"))
    else:
        run_checked(wl, build(without_threads(wl.mod, sch).mod, cpu_target()), tvm.cpu(0), what=case)


def test_a_store_that_cannot_take_the_epilogue_is_one_line_and_a_plain_layer_is_unchanged():
    wl = conv2d(1, 16, 14, 14, 32, **EPILOGUE)
    with pytest.raises(ValueError, match=r"^the kernel's result comes out of a reduction no one thread runs "
                                         r"\(conv\)$"):
        fuse_epilogue(s_tir.Schedule(wl.mod))   # unscheduled: the sum over the channels is no thread's loop
    sch = NCHW_SPLITK.apply(conv2d(1, 16, 14, 14, 32), SPLITK)
    assert fuse_epilogue(sch) is sch and "conv_epilogue" not in block_names(sch)
