"""GEMM: the workload is right on llvm; every ladder rung compiles for sm_90a, shows its construct, and
(with nvcc) neither spills nor uses a stack frame; bad parameters are one-line ValueErrors."""
from __future__ import annotations

import re
import shutil

import pytest
import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tirbench.bench.harness import run_checked
from tirbench.core.cuda_source import device_source, kernel_only, nvcc_report
from tirbench.core.machine import cpu_target, cuda_target
from tirbench.schedules.common.record import KernelRecord
from tirbench.schedules.common.tiling import SIMT_ASYNC_CONFIG
from tirbench.schedules.gemm.records import (LADDER, V0_NAIVE, V5_WARP_TILED, V6_WMMA, V7_MMA_LDMATRIX, V8_WGMMA,
                                            V9_TMA_WS)
from tirbench.schedules.gemm.simt import (
    gemm_v0_naive,
    gemm_v1_local,
    gemm_v2_shared,
    gemm_v3_vectorized,
    gemm_v5_space,
    gemm_v5_warp_tiled,
)
from tirbench.schedules.gemm.tensorcore import gemm_v6_wmma, gemm_v7_mma
from tirbench.schedules.gemm.warpgroup import gemm_v8_wgmma
from tirbench.schedules.gemm.tma_ws import gemm_v9_tma_ws, v9_kernel
from tirbench.schedules.gemm.warp_specialized import staged_index, store_chunk_columns
from tirbench.workloads.base import Workload
from tirbench.workloads.gemm import gemm

SIZE = 1024
EXPECTED = {
    "v0_naive": (),
    "v1_local": (),
    "v2_shared": ("__shared__",),
    "v3_vectorized": ("__shared__", "float4"),
    "v4_pipelined": ("__shared__", "float4", "cp.async.cg.shared.global", "cp.async.wait_group"),
    "v5_warp_tiled": ("__shared__", "float4", "cp.async.cg.shared.global", "cp.async.wait_group"),
    "v6_wmma": ("__shared__", "wmma::mma_sync", "wmma::load_matrix_sync"),
    "v7_mma_ldmatrix": ("__shared__", "mma.sync.aligned.m16n8k16", "ldmatrix.sync", "cp.async.cg.shared.global"),
    "v8_wgmma": ("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", "wgmma.fence", "wgmma.commit_group",
                 "wgmma.wait_group", "fence.proxy.async", "cp.async.cg.shared.global", "float2"),
    "v9_tma_ws": ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
                  "cp.async.bulk.tensor.3d", "CUtensorMap", "mbarrier.try_wait.parity", "mbarrier.arrive.expect_tx",
                  "setmaxnreg.dec.sync.aligned.u32", "setmaxnreg.inc.sync.aligned.u32",
                  "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16", "float2"),
}


def _gemm(record: KernelRecord, size: int = SIZE) -> Workload:
    """The size^3 GEMM with the inputs ``record`` takes (float32 for the SIMT rungs, float16 for tensor cores)."""
    fp32 = gemm(size, size, size)
    return fp32 if record.accepts(fp32) is None else gemm(size, size, size, "float16")


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    """CUDA source of every rung at SIZE^3 (the tensor-intrinsic import, ~35 s, happens once here)."""
    import tvm.s_tir.tensor_intrin.cuda  # noqa: F401

    out = {}
    for record in LADDER:
        with tvm.transform.PassContext(config=record.pass_config):
            out[record.name] = device_source(record.apply(_gemm(record)))
    return out


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_workload_matches_reference_on_llvm(dtype):
    wl = gemm(64, 48, 32, dtype)
    assert (wl.shape, wl.flops, wl.out_dtype) == ("64x48x32", 2 * 64 * 48 * 32, "float32")
    assert wl.bytes == (64 * 32 + 32 * 48) * (4 if dtype == "float32" else 2) + 64 * 48 * 4
    run_checked(wl, tvm.compile(wl.mod, target=cpu_target()), tvm.cpu(0))


def test_workload_rejects_bad_arguments():
    with pytest.raises(ValueError, match="k must be a positive integer"):
        gemm(64, 64, 0)
    with pytest.raises(ValueError, match="unsupported dtype 'int8'"):
        gemm(64, 64, 64, "int8")


@pytest.mark.parametrize("name", [record.name for record in LADDER])
def test_rung_compiles_with_its_construct(sources, name):
    src = sources[name]
    assert 'extern "C" __global__' in src
    missing = [s for s in EXPECTED[name] if s not in src]
    assert not missing, f"{name}: {missing} not in the CUDA source"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("name", [record.name for record in LADDER])
def test_rung_has_no_spills(sources, name):
    report = " ".join(nvcc_report(sources[name]))
    frame, stores, loads = map(int, re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                                              r"(\d+) bytes spill loads", report).groups())
    assert (frame, stores, loads) == (0, 0, 0), f"{name}: {report}"


def _sch(dtype: str = "float32", size: int = SIZE) -> s_tir.Schedule:
    return s_tir.Schedule(gemm(size, size, size, dtype).mod)


@pytest.mark.parametrize("call, param", [
    (lambda: gemm_v0_naive(_sch(), threads=(32, 64)), "threads"),
    (lambda: gemm_v0_naive(_sch(), threads=(24, 16)), r"threads\[0\]"),
    (lambda: gemm_v1_local(_sch(), tile_k=3), "tile_k"),
    (lambda: gemm_v1_local(_sch(), threads=(32, 64)), "threads"),
    (lambda: gemm_v2_shared(_sch(), block_tile=(0, 128)), r"block_tile\[0\] must be a positive integer"),
    (lambda: gemm_v2_shared(_sch(), thread_tile=(3, 8)), r"thread_tile\[0\]"),
    (lambda: gemm_v3_vectorized(_sch(), thread_tile=(2, 2)), "block_tile/thread_tile"),
    (lambda: gemm_v3_vectorized(_sch(), thread_tile=(8, 2)), r"thread_tile\[1\]"),
    (lambda: gemm_v3_vectorized(_sch(), tile_k=2), "tile_k"),
    (lambda: gemm_v5_warp_tiled(_sch(), warp_tile=(64, 64)), "warp_tile"),
    (lambda: gemm_v5_warp_tiled(_sch(), tile_k=64, stages=8), "stages"),
    (lambda: gemm_v5_warp_tiled(_sch(), stages=0), "stages"),
    (lambda: gemm_v5_warp_tiled(_sch(), raster=3), "raster"),
    (lambda: gemm_v5_warp_tiled(_sch(), block_tile=(112, 128), warp_tile=(16, 128), tile_k=28, async_copy=False),
     r"tile_k=28: the A tile \(3136 elements\) is not a multiple of 224 threads x 4-element copies"),
    (lambda: gemm_v7_mma(_sch("float16"), raster=0), "raster"),
    (lambda: gemm_v6_wmma(_sch("float32")), "float16"),
    (lambda: gemm_v7_mma(_sch("float32")), "float16"),
    (lambda: gemm_v7_mma(_sch("float16"), tile_k=8), "tile_k"),
    (lambda: gemm_v7_mma(_sch("float16"), warp_tile=(16, 16)), "block_tile/warp_tile"),
    (lambda: gemm_v7_mma(_sch("float16"), stages=16), "stages"),
    (lambda: gemm_v5_warp_tiled(_sch(), prefetch="far"), "prefetch"),
    (lambda: gemm_v5_warp_tiled(_sch(), stages=2, prefetch="next_tile"), "stages >= 3"),
    (lambda: gemm_v7_mma(_sch("float16"), prefetch="x"), "prefetch"),
    (lambda: gemm_v5_space(_sch(), stages=0), "stages"),
    (lambda: gemm_v5_space(_sch(), lanes=(8, 8)), "lanes"),
    (lambda: gemm_v5_space(s_tir.Schedule(gemm(1024, 1000, 1024).mod)), r"lanes\[1\]"),
    (lambda: gemm_v5_space(_sch(), stages=2, prefetch="next_tile"), "stages >= 3"),
    (lambda: gemm_v5_space(s_tir.Schedule(gemm(1024, 1024, 48).mod)), "tile_k"),
    (lambda: gemm_v8_wgmma(_sch("float32")), "float16"),
    (lambda: gemm_v8_wgmma(_sch("float16"), block_tile=(96, 128)), r"block_tile\[0\]"),
    (lambda: gemm_v8_wgmma(_sch("float16"), block_tile=(128, 512)), "N=256"),
    (lambda: gemm_v8_wgmma(_sch("float16"), block_tile=(1024, 128)), "threads"),
    (lambda: gemm_v8_wgmma(_sch("float16"), tile_k=32), "tile_k must be 64"),
    (lambda: gemm_v8_wgmma(_sch("float16"), block_tile=(128, 96)), r"block_tile\[1\]=96: the swizzle128 layout"),
    (lambda: gemm_v8_wgmma(_sch("float16"), tile_k=24, layout="interleaved"), "tile_k"),
    (lambda: gemm_v8_wgmma(_sch("float16"), layout="swizzle64"), "layout"),
    (lambda: gemm_v8_wgmma(_sch("float16"), stages=8, block_tile=(128, 256)), "shared"),
    (lambda: gemm_v8_wgmma(_sch("float16"), stages=2, overlap=True), "stages >= 3"),
    # the records: a workload a family does not take, a rung's defaults at a size they do not divide, an override
    (lambda: V6_WMMA.apply(gemm(64, 64, 64)), r"v6_wmma does not take gemm 64x64x64 \(float32\): takes float16"),
    (lambda: V0_NAIVE.apply(gemm(1000, 1000, 1000)), r"threads\[0\]=16 does not divide m=1000"),
    (lambda: V8_WGMMA.apply(_gemm(V8_WGMMA), {"tile_k": 32}), "tile_k must be 64"),
])
def test_bad_parameters_raise(call, param):
    with pytest.raises(ValueError, match=param) as err:
        call()
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("record, kwargs", [
    (V5_WARP_TILED, dict(prefetch="next_tile")),
    (V7_MMA_LDMATRIX, dict(stages=3, prefetch="next_tile")),
], ids=["v5_warp_tiled", "v7_mma_ldmatrix"])
def test_next_tile_prefetch_compiles(record, kwargs):
    """The nested pipeline (fragments of the next tile loaded during this tile's last k step) lowers for sm_90a."""
    import tvm.s_tir.tensor_intrin.cuda  # noqa: F401

    sch = record.apply(_gemm(record), kwargs)
    with tvm.transform.PassContext(config=record.pass_config):
        assert "cp.async" in device_source(sch)


def _passes_cuda_postprocs(sch: s_tir.Schedule, wl: Workload) -> bool:
    """Apply MetaSchedule's CUDA postprocessors (cooperative fetch rewrite, VerifyGPUCode at the v5 space's
    227 KB shared-memory limit) to ``sch`` in place; whether all of them accept it."""
    from tvm.s_tir import meta_schedule as ms

    from tirbench.tuning.tune import space_target

    posts = ms.postproc.Postproc.create("cuda")
    for post in posts:
        post._initialize_with_tune_context(ms.TuneContext(mod=wl.mod, target=space_target("v5")))
    return all(post.apply(sch) for post in posts)


def test_v5_space_samples_differ_and_compile():
    """The design space samples different tilings per seed; a sample that passes MetaSchedule's CUDA
    postprocessors (the cooperative fetch rewrite, VerifyGPUCode at the 227 KB shared-memory limit) compiles."""
    wl = gemm(SIZE, SIZE, SIZE)
    decisions, compiled = set(), 0
    for seed in range(1, 13):
        sch = gemm_v5_space(s_tir.Schedule(wl.mod, seed=seed), stages=3)
        decisions.add(str(list(sch.trace.decisions.values())))
        if _passes_cuda_postprocs(sch, wl) and compiled < 2:
            with tvm.transform.PassContext(config=SIMT_ASYNC_CONFIG):
                assert "cp.async" in device_source(sch)
            compiled += 1
    assert len(decisions) > 6 and compiled == 2


def test_hand_v5_kernel_is_a_point_of_the_v5_space():
    """Forcing the space's decisions to the hand kernel's tiles (128x256 blocks of 2x8 warps, 8x4 lanes, 8x8 per
    thread, tile_k 16, raster 4) passes MetaSchedule's postprocessors and gives the hand kernel's launch and math."""
    wl = gemm(SIZE, SIZE, SIZE)
    sch = gemm_v5_space(s_tir.Schedule(wl.mod, seed=1), lanes=(8, 4), stages=3, columns_outer=True)
    trace = sch.trace
    sampling = [inst for inst in trace.insts if inst.kind.name.startswith("Sample")]
    # thread tile columns (index into [4, 8]), blocks x warps of m and of n, tile_k (index into [8, 16, 32]),
    # raster, the two cooperative-fetch vector widths
    for inst, decision in zip(sampling, [1, [8, 2], [4, 8], 1, [2, 4], 0, 0], strict=True):
        trace = trace.with_decision(inst, decision, remove_postproc=True)
    forced = s_tir.Schedule(wl.mod)
    trace.apply_to_schedule(forced, remove_postproc=True)
    assert _passes_cuda_postprocs(forced, wl)
    hand = gemm_v5_warp_tiled(s_tir.Schedule(wl.mod), block_tile=(128, 256), warp_tile=(64, 32), thread_tile=(8, 8),
                              tile_k=16, stages=3, raster=4, columns_outer=True)
    with tvm.transform.PassContext(config=SIMT_ASYNC_CONFIG):
        space_src, hand_src = (kernel_only(device_source(s)) for s in (forced, hand))

    def multiply_adds(src: str) -> list[str]:
        return [line.strip() for line in src.splitlines() if "= (C_local_ptr[" in line]

    assert "__launch_bounds__(512)" in space_src and "__launch_bounds__(512)" in hand_src
    assert multiply_adds(space_src) == multiply_adds(hand_src) and len(multiply_adds(hand_src)) >= 8 * 8 * 16


@pytest.mark.parametrize("layout", ["interleaved", "swizzle128"])
def test_wgmma_shared_layouts_are_bijective(layout):
    """Every element of a 128 x 64 A tile and a 64 x 256 B tile gets its own shared-memory slot."""
    from tirbench.schedules.intrinsics.wgmma import a_layout, b_layout

    a_slots = {a_layout(layout, r, k) for r in range(128) for k in range(64)}
    b_slots = {b_layout(layout, k, n) for k in range(64) for n in range(256)}
    assert len(a_slots) == 128 * 64 and len(b_slots) == 64 * 256


def test_wgmma_swizzle_spreads_a_column_over_all_chunks():
    """The 16-byte chunk holding k = 0..7 of rows 0..7 moves to eight different chunks (bank groups)."""
    from tirbench.schedules.intrinsics.wgmma import a_layout

    assert sorted(a_layout("swizzle128", r, 0)[2] for r in range(8)) == list(range(8))
    assert {a_layout("interleaved", r, 0)[1] for r in range(8)} == {0}


def test_wgmma_accumulator_layout_round_trips():
    """register_of (element -> register) and element_of (lane, register -> element) are inverse on 16 x 16."""
    from tirbench.schedules.intrinsics.wgmma import element_of, lane_layout

    seen = set()
    for lane in range(32):
        for reg in range(8):
            i, j = element_of(lane, reg)
            assert lane_layout(i, j) == (lane, reg)
            seen.add((i, j))
    assert len(seen) == 256


def test_wgmma_overlap_keeps_one_group_in_flight_over_three_buffers():
    """overlap: each tile waits for the previous tile's wgmma group, waits for its own copies itself (one group
    fewer than TVM's pipeline allows), and the copies rotate over three shared buffers, one per group."""
    sch = gemm_v8_wgmma(_sch("float16"), stages=3, overlap=True)
    with tvm.transform.PassContext(config=V8_WGMMA.pass_config):
        src = device_source(sch)
    loop = src[src.index("for (int r_0"):]
    assert "wgmma_wait_group_wait_group_sync_aligned_1()" in loop
    assert "cp_async_wait_group_async_wait_group_1();\n    tvm_builtin_cuda_cta_sync()" in loop
    assert "% 3) * 8192)" in loop


@pytest.mark.parametrize("columns_outer, second", [(False, "C_local_ptr[1] = "), (True, "C_local_ptr[8] = ")])
def test_v5_ffma_order(columns_outer, second):
    """A thread's 8x8 multiply-adds run row by row (C[0], C[1], ...) or column by column (C[0], C[8], ...)."""
    sch = gemm_v5_warp_tiled(_sch(), columns_outer=columns_outer)
    with tvm.transform.PassContext(config=SIMT_ASYNC_CONFIG):
        src = device_source(sch)
    updates = re.findall(r"C_local_ptr\[\d+\] = \(C_local_ptr", src)
    assert updates[0].startswith("C_local_ptr[0] = ") and updates[1].startswith(second)


@pytest.mark.parametrize("params, message", [
    ({"block_tile": (128, 256), "stages": 5, "tma_store": False},
     r"need 245840 bytes of shared memory per block \(TMA ring\)"),
    ({"block_tile": (128, 128), "stages": 7}, r"need 262256 bytes .* \(TMA ring, store staging\)"),
    ({"block_tile": (192, 128)}, "each of the 2 consumer warpgroups owns 64 rows, so it must be 128"),
    ({"block_tile": (192, 128), "consumers": 3, "tma_store": False},
     r"consumers=3: .* need 94208 registers, more than an SM's 65536 \(the kernel would hang in setmaxnreg\): "
     "at most 2"),
    ({"block_tile": (128, 512)}, "one wgmma covers at most N=256 columns"),
    ({"block_tile": (128, 96)}, "block_tile\\[1\\]=96 must be a multiple of 64"),
    ({"persistent_ctas": -1}, "persistent_ctas=-1"),
])
def test_v9_bad_parameters_one_line(params, message):
    with pytest.raises(ValueError, match=message) as err:
        V9_TMA_WS.apply(gemm(1024, 1024, 1024, "float16"), params)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("size, params, message", [
    ((1024, 1024, 1024, "float32"), {}, "takes float16 inputs"),
    ((1024, 1024, 1500, "float16"), {}, r"^k=1500: TMA reads A \(m x k\) by rows 3000 bytes apart, and a tensor map's "
                                        r"row stride must be a multiple of 16 bytes: k must be a multiple of 8$"),
    ((1024, 1004, 1024, "float16"), {}, r"^n=1004: TMA reads B \(k x n\) by rows 2008 bytes apart"),
    ((1000, 1024, 1024, "float16"), {"tma_store": False}, "block_tile\\[0\\]=128 does not divide m=1000"),
    ((1024, 1000, 1024, "float16"), {"tma_store": False}, "block_tile\\[1\\]=256 does not divide n=1000"),
])
def test_v9_refuses_fp32_rows_tma_cannot_stride_and_partial_tiles_from_registers(size, params, message):
    """v9 takes float16, rows of A and B that a tensor map strides (multiples of 16 bytes), and with the register
    epilogue (it stores whole tiles) only M and N its tiles divide; one line each."""
    with pytest.raises(ValueError, match=message) as err:
        gemm_v9_tma_ws(s_tir.Schedule(gemm(*size[:3], size[3]).mod), **params)
    assert "\n" not in str(err.value)


def test_v9_writes_a_half_c_as_cublas_does_and_only_v9_takes_it():
    wl = gemm(1024, 1024, 1024, "float16", out_dtype="float16")
    assert wl.bytes == 3 * 1024 * 1024 * 2 and wl.out_dtype == "float16"
    src = device_source(V9_TMA_WS.apply(wl, {"tma_store": False}))
    kernel = src[src.index('extern "C" __global__'):]
    assert "half* __restrict__ C_ptr" in kernel.splitlines()[0]
    assert "*(half2*)(C_ptr" in kernel and "(half)(" in kernel   # two rounded accumulators per 4-byte store
    assert any("0 bytes spill stores" in line for line in nvcc_report(src))
    staged = device_source(V9_TMA_WS.apply(wl))   # by default through shared memory, then TMA
    assert "*(half2*)(((half*)_ptr)" in staged and "C_ptr" not in staged[staged.index('extern "C" __global__'):]
    for record in (V8_WGMMA, V7_MMA_LDMATRIX):
        with pytest.raises(ValueError, match="writes float32 outputs, not float16"):
            record.apply(wl)


def test_v9_is_a_tirx_kernel_with_a_tma_map_per_operand():
    src = device_source(V9_TMA_WS.apply(gemm(1024, 1024, 1024, "float16"), {"block_tile": (128, 64)}))
    kernel = src[src.index('extern "C" __global__'):]
    assert kernel.splitlines()[0].count("const __grid_constant__ CUtensorMap") == 3   # A, B and C, encoded on the host
    assert "cp.async.cg" not in src   # no per-thread copies: the tiles arrive by TMA


def tensor_maps(sch: s_tir.Schedule) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    """The tensor maps the host code of a TIRx kernel encodes (``tensormap_encode_tiled``), by operand: (global
    extents, box), innermost dimension first."""
    mod = tirx.transform.BindTarget(cuda_target().with_host("llvm"))(sch.mod)
    calls: list[tvm.ir.Call] = []
    tvm_ffi.structural_map(tvm.tirx.get_tir_pipeline("tirx")[0](mod), (tvm.ir.Call, lambda c: calls.append(c) or c))
    maps = {}
    for call in calls:
        if getattr(call.op, "name", None) == "tirx.tensormap_encode_tiled":
            rank, args = int(call.attrs.rank), [int(a) for a in call.args[2:]]
            maps[call.args[0].name[0]] = (tuple(args[:rank]), tuple(args[2 * rank - 1:3 * rank - 1]))
    return maps


def launch_params(sch: s_tir.Schedule) -> list[str]:
    """The launch parameters of a TIRx kernel's device function (``clusterCtaIdx.x`` for a cluster launch)."""
    mod = tirx.transform.BindTarget(cuda_target().with_host("llvm"))(sch.mod)
    with cuda_target():
        mod = tvm.tirx.get_tir_pipeline("tirx")[0](mod)
    return [str(p) for f in mod.functions.values() if f.attrs and "tirx.kernel_launch_params" in f.attrs
            for p in f.attrs["tirx.kernel_launch_params"]]


@pytest.mark.parametrize("size, out_dtype, params", [
    ((1000, 1000, 1000), "float32", {}),
    ((1000, 1000, 1000), "float16", {"block_tile": (128, 64), "stages": 6, "persistent_ctas": 0}),
    ((2000, 3000, 1000), "float32", {"block_tile": (128, 128), "stages": 6}),
    ((37, 4096, 4096), "float32", {"block_tile": (64, 128), "stages": 4, "consumers": 1, "persistent_ctas": 0}),
    ((100, 3000, 5000), "float32", {"block_tile": (128, 64), "stages": 6, "persistent_ctas": 0}),
], ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else None)
def test_v9_at_shapes_its_tiles_do_not_divide_leaves_the_edges_to_tma(size, out_dtype, params):
    """Whole tiles past the edges: the tensor maps carry the true m, n, k (the TMA unit zero-fills the loads beyond
    them and clips the store), the boxes and the bytes a stage expects are whole tiles, B comes in 64-column panels
    where n is not a multiple of 64, and nvcc builds it for sm_90a without spills. (TMA cannot run on the CPU: the
    numbers are for the GPU to check.)"""
    m, n, k = size
    sch = V9_TMA_WS.apply(gemm(m, n, k, "float16", out_dtype=out_dtype), params)
    bm, bn = V9_TMA_WS.params(params)["block_tile"]
    maps = tensor_maps(sch)
    assert maps["A"] == ((k, m), (64, bm))
    assert maps["B"] == (((n, k), (64, 64)) if n % 64 else ((64, k, n // 64), (64, 64, bn // 64)))
    assert maps["C"][0] == (n, m)
    src = device_source(sch)
    assert f"(uint){(bm + bn) * 64 * 2})" in src   # expect_tx: A's and B's whole boxes
    if shutil.which("nvcc"):
        assert any("0 bytes spill stores" in line for line in nvcc_report(src))


@pytest.mark.parametrize("out_dtype", ["float16", "float32"])
def test_the_tma_store_staging_index_is_the_swizzle_tma_reads(out_dtype):
    """``staged_index`` (how the epilogue writes the staging buffers, as one flat buffer) is the layout TVM plans the
    TMA store from (``alloc_tcgen05_mma_AB``: 128-byte swizzle), element by element, on the CPU."""
    from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout

    ec = store_chunk_columns(out_dtype)
    layout = mma_shared_layout(out_dtype, SwizzleMode.SWIZZLE_128B_ATOM, (4, 64, ec))
    for buf, row, col in [(b, r, c) for b in (0, 3) for r in range(64) for c in range(ec)]:
        flat = (buf * 64 + row) * ec + col
        assert int(layout.apply(flat)["m"]) == staged_index(buf, row, col, out_dtype), (buf, row, col)


@pytest.mark.parametrize("out_dtype", ["float16", "float32"])
def test_v9_split_k_in_a_cluster_slices_k_and_sums_through_distributed_shared_memory(out_dtype):
    """v9's ``split``: one block per (tile, slice of K), the slices of a tile one cluster; each block's producer loads
    its own slice's k tiles (the coordinates start at its rank's), and the sums go through the cluster's shared
    memory (``mapa`` + ``ld.shared::cluster``) between two cluster barriers, stored four outputs at a time and only
    inside C; no TMA store, no global partial buffer, and no spills (numbers: the GPU, ``gemm_rules.py``)."""
    sch = V9_TMA_WS.apply(gemm(100, 3000, 5000, "float16", out_dtype=out_dtype),
                          {"block_tile": (128, 128), "stages": 4, "persistent_ctas": 0, "tma_store": False, "split": 4})
    assert len(sch.mod.functions) == 1 and tensor_maps(sch).keys() == {"A", "B"}   # C from the registers
    assert "clusterCtaIdx.x" in launch_params(sch)
    src = device_source(sch)
    kernel = src[src.index('extern "C" __global__'):]
    assert "%%cluster_ctarank" in src and kernel.count("tvm_builtin_cuda_cluster_sync()") == 2
    assert kernel.count("mapa_u32_shared__cluster") == 4 and kernel.count("ld_vec_shared__cluster_v4_f32") == 4
    assert "(((int)blockIdx.x) & 3) * 1280)" in kernel   # slice = rank: 20 k tiles of 64 each
    assert "< 375)" in kernel and "< 25)" in kernel   # 3000 columns (375 x 8) and 100 rows (25 of a rank's 32) clipped
    if shutil.which("nvcc"):
        assert any("0 bytes spill stores" in line for line in nvcc_report(src))


@pytest.mark.parametrize("params, message", [
    ({"split": 9}, "split=9: a cluster holds at most 8 blocks"),
    ({"split": 4, "persistent_ctas": 132, "tma_store": False}, "takes one block per tile and the register epilogue"),
    ({"split": 4, "persistent_ctas": 0}, "takes one block per tile and the register epilogue"),
    ({"split": 0, "persistent_ctas": 0, "tma_store": False}, "split must be a positive integer, got 0"),
    ({"split": 3, "persistent_ctas": 0, "tma_store": False, "k": 128}, r"k=128 is 2 k tiles of 64, too few for 3"),
    ({"split": 2, "persistent_ctas": 0, "tma_store": False, "block_tile": (128, 256), "stages": 4},
     r"need 329792 bytes .* \(TMA ring, partial tile\)"),
])
def test_v9_split_bad_parameters_one_line(params, message):
    params = dict(params)
    k = params.pop("k", 1024)
    with pytest.raises(ValueError, match=message) as err:
        V9_TMA_WS.apply(gemm(100, 1024, k, "float16"), params)
    assert "\n" not in str(err.value)


def test_v9_multicast_shares_the_a_tile_in_a_cluster_of_two():
    """``multicast=2``: the two blocks of a cluster (neighbouring tiles of one block row) each load half of A's tile
    into both with one multicast TMA copy (CTA mask 0b11) while each block's barrier still expects the whole tile,
    each *empty* barrier counts both blocks' consumers, a stage goes back to both producers (remote arrivals), and the
    cluster is synchronised after the barriers' init and before it exits; no spills."""
    sch = V9_TMA_WS.apply(gemm(1000, 1000, 1000, "float16", out_dtype="float16"),
                          {"block_tile": (128, 64), "stages": 6, "persistent_ctas": 0, "multicast": 2})
    assert tensor_maps(sch)["A"] == ((1000, 1000), (64, 64))   # a box of half the tile's 128 rows
    assert "clusterCtaIdx.x" in launch_params(sch)   # launched in clusters
    src = device_source(sch)
    kernel = src[src.index('extern "C" __global__'):]
    assert ".multicast::cluster" in src and "(ushort)3)" in kernel
    assert f"(uint){(128 + 64) * 64 * 2})" in kernel   # expect_tx: the whole A tile, both halves, and B's
    assert kernel.count("mbarrier_init_init_shared_b64") == 12 and kernel.count("(uint)4);") == 6   # 2 x 2 consumers
    assert kernel.count("mbarrier_arrive_nocount_arrive_shared__cluster_b64") == 4   # to both blocks, twice
    assert kernel.count("tvm_builtin_cuda_cluster_sync()") == 2
    if shutil.which("nvcc"):
        assert any("0 bytes spill stores" in line for line in nvcc_report(src))


@pytest.mark.parametrize("params, message", [
    ({"multicast": 3, "persistent_ctas": 0}, "multicast=3: clusters of 2 or 4 blocks share the A tile"),
    ({"multicast": 2, "persistent_ctas": 131}, r"persistent_ctas=131, multicast=2: persistent blocks come in whole"),
    ({"multicast": 2, "block_tile": (128, 64), "stages": 2, "persistent_ctas": 0},
     r"a block of 81952 bytes of shared memory would share its SM with another"),
    ({"multicast": 2, "split": 2, "persistent_ctas": 0, "tma_store": False}, "either splits K or shares a tile"),
    ({"multicast": 2, "shares": "C"}, "shares='C': a cluster shares the A tile .* or the B tile"),
])
def test_v9_multicast_bad_parameters_one_line(params, message):
    with pytest.raises(ValueError, match=message) as err:
        V9_TMA_WS.apply(gemm(1024, 1024, 1024, "float16"), params)
    assert "\n" not in str(err.value)


def test_v9_multicast_of_b_shares_the_b_tile_down_a_block_column():
    """``shares="B"``: the blocks of a cluster take neighbouring tiles of one block column and each loads half of B's
    64 k rows (a box of 32 rows of each 64-column panel) into both, A's tile whole; persistent, 66 clusters over 8 x 16
    cluster tiles take two rounds in the producer and the consumers alike; no spills."""
    wl = gemm(2000, 3000, 1000, "float16", out_dtype="float16")
    sch = V9_TMA_WS.apply(wl, {"block_tile": (128, 192), "stages": 4, "multicast": 2, "shares": "B"})
    assert tensor_maps(sch)["B"] == ((3000, 1000), (64, 32)) and tensor_maps(sch)["A"] == ((1000, 2000), (64, 128))
    assert "clusterCtaIdx.x" in launch_params(sch)
    src = device_source(sch)
    assert ".multicast::cluster" in src and re.findall(r"for \(int r\w* = 0; r\w* < (\d+);", src) == ["2", "2"]
    if shutil.which("nvcc"):
        assert any("0 bytes spill stores" in line for line in nvcc_report(src))


def test_v9_persistent_multicast_loads_every_round_its_consumers_take():
    """Persistent clusters: 66 clusters of two blocks over 128 cluster tiles take two
    rounds, and the producer loads both (it once counted rounds of blocks, one, and the consumers waited for ever)."""
    kernel = v9_kernel(2000, 3000, 1000, block_tile=(128, 192), stages=4, consumers=2, persistent_ctas=132,
                       out_dtype="float16", tma_store=True, multicast=2)
    src = device_source(s_tir.Schedule(tvm.IRModule({"main": kernel})))
    assert re.findall(r"for \(int r\w* = 0; r\w* < (\d+);", src) == ["2", "2"]
