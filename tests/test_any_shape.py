"""Any M, N, K (issue #16): the GEMM rungs v2..v8 at sizes their tiles do not divide build for sm_90a (nvcc takes the
CUDA, and no vector access of A, B or C is wider than their rows' alignment), compute the right product (v2..v5 on
llvm, their thread bindings dropped), never touch memory outside A, B and C (guard values around C on llvm; for every
rung, a proof over the lowered loop nest), and compile as before where the tiles divide. Hardware limits stay
one-line errors."""
from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.script import ir as I
from tvm.script import tirx as T
from tvm.sym.analyzer import Analyzer

from tirbench.bench.harness import check_output, run_checked
from tirbench.core.build import build
from tirbench.core.cuda_source import device_source, nvcc_report
from tirbench.core.machine import cpu_target, cuda_target
from tirbench.core.serial import without_threads
from tirbench.schedules.gemm.records import LADDER, PADDED, V5_WARP_TILED, V8_WGMMA, divisible_shape, padded
from tirbench.schedules.gemm.simt import gemm_v5_warp_tiled
from tirbench.schedules.gemm.tensorcore import gemm_v6_wmma
from tirbench.schedules.gemm.warpgroup import gemm_v8_wgmma
from tirbench.workloads.gemm import gemm

RECORDS = {record.name: record for record in LADDER}
#: The rungs that pad: v0 and v1 need tiles that divide; v9 pads nothing (its TMA boxes reach past the edges, which
#: the TMA unit zero-fills and clips: ``test_gemm_schedules``) and takes only rows of 16-byte multiples, not (1, 7, 9).
RUNGS = [name for name in RECORDS if name not in ("v0_naive", "v1_local", "v9_tma_ws")]
SIMT = ["v2_shared", "v3_vectorized", "v4_pipelined", "v5_warp_tiled"]
ODD = [(1, 7, 9), (1000, 1000, 1000), (2000, 3000, 1000)]


@pytest.fixture(scope="module", autouse=True)
def tensor_intrinsics() -> None:
    """v6 and v7 tensorize with TVM's registered intrinsics (~35 s to import, once per process)."""
    import tvm.s_tir.tensor_intrin.cuda  # noqa: F401


def dtype_of(name: str) -> str:
    """The inputs the rung takes: float32 for the SIMT rungs, float16 for tensor cores."""
    return "float32" if RECORDS[name].accepts(gemm(16, 16, 16)) is None else "float16"


def schedule(name: str, size: tuple[int, int, int], mod: tvm.IRModule | None = None) -> s_tir.Schedule:
    """The rung ``name`` at its defaults on the GEMM of ``size`` (or on ``mod``)."""
    record = RECORDS[name]
    if mod is None:
        return record.apply(gemm(*size, dtype_of(name)))
    return record.schedule(s_tir.Schedule(mod), **record.params())


def cuda(name: str, sch: s_tir.Schedule) -> str:
    with tvm.transform.PassContext(config=RECORDS[name].pass_config):
        return device_source(sch)


@pytest.mark.parametrize("size", ODD, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", RUNGS)
def test_rung_builds_for_sm90a_at_odd_sizes(name, size):
    src = cuda(name, schedule(name, size))
    assert 'extern "C" __global__' in src
    if shutil.which("nvcc"):
        assert any("registers" in line for line in nvcc_report(src))


#: Bytes per vector type the CUDA code generator casts global pointers to.
_VECTOR_BYTES = {"float4": 16, "float2": 8, "float": 4, "uint4": 16, "uint2": 8, "uint1": 4, "half2": 4, "half4": 8,
                 "half": 2}


def _widest_accesses(src: str) -> dict[str, int]:
    """The widest vector access (bytes) of A, B and C in CUDA source: vector casts and cp.async copies."""
    widest = {"A": 0, "B": 0, "C": 0}
    for vec, buf in re.findall(r"\*\((\w+)\*\)\(+(A|B|C)_ptr", src):
        widest[buf] = max(widest[buf], _VECTOR_BYTES[vec])
    for nbytes, buf in re.findall(r"ptx_cp_async\w*?_(\d+)_\d+_\d+\(buf_dyn_shmem_ptr, [^;]*?\b(A|B)_ptr", src):
        widest[buf] = max(widest[buf], int(nbytes))
    return widest


@pytest.mark.parametrize("size", [(1, 7, 9), (3, 6, 10), (37, 4096, 4096), (2000, 3000, 1000)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", RUNGS)
def test_vector_accesses_fit_the_row_alignment(name, size):
    """A row of A is k elements, of B and C n: a 16-byte access only where the row is a multiple of 16 bytes (TVM
    keeps the vector copy only when the padding predicate is the same for all its lanes, which is that condition)."""
    m, n, k = size
    item = 2 if dtype_of(name) == "float16" else 4
    rows = {"A": k * item, "B": n * item, "C": n * 4}
    widest = _widest_accesses(cuda(name, schedule(name, size)))
    assert all(rows[buf] % nbytes == 0 for buf, nbytes in widest.items() if nbytes), (widest, rows)
    if size == (2000, 3000, 1000) and name != "v2_shared":
        assert widest["B"] == 16 and widest["C"] == 16, widest   # aligned rows keep the 16-byte accesses


@pytest.mark.parametrize("name", ["v4_pipelined", "v5_warp_tiled", "v7_mma_ldmatrix", "v8_wgmma"])
def test_padded_fills_stay_asynchronous(name):
    """The edge tiles' fills are zero-filling, predicated cp.async copies (the same 16 bytes as inside)."""
    src = cuda(name, schedule(name, (2000, 3000, 1000)))
    assert re.search(r"ptx_cp_async_legacy_pred_cg_16_\w+\(buf_dyn_shmem_ptr, [^;]*\bB_ptr", src)


@pytest.mark.parametrize(("size", "nbytes"), [((2500, 3500, 1500), 8), ((37, 4094, 4094), 4)],
                         ids=["2500x3500x1500", "37x4094x4094"])
def test_v8_unaligned_rows_keep_asynchronous_fills(size, nbytes):
    """Rows of A and B that are not 16-byte aligned (k and n multiples of 4 or 2 halves, not 8) are filled by
    zero-filling predicated cp.async copies of 8 or 4 bytes (``warpgroup.copy_elems``), not element by element."""
    src = cuda("v8_wgmma", schedule("v8_wgmma", size))
    for buf in ("A", "B"):
        assert re.search(rf"ptx_cp_async_legacy_pred_ca_{nbytes}_\w+\(buf_dyn_shmem_ptr, [^;]*\b{buf}_ptr", src), buf
    assert "condval" not in src   # no synchronous element copy left


@pytest.mark.parametrize("size", [(1, 7, 9), (37, 130, 20), (129, 257, 65), (1000, 1000, 1000)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", SIMT)
def test_simt_rungs_match_numpy_on_llvm(name, size):
    wl = gemm(*size, dtype_of(name))
    serial = without_threads(wl.mod, schedule(name, size))
    run_checked(wl, build(serial, cpu_target()), tvm.cpu(0), what=f"{name} at {wl.shape}")


# -- guard values: C embedded in a larger buffer -------------------------------------------------------------------
#: Rows, and columns, of sentinels on each side of C: 16 floats keep C's first element 64-byte aligned, as TVM
#: assumes of every buffer (and llvm's vector code relies on).
GUARD = 16
SENTINEL = -12345.0


def pitch_for(n: int) -> int:
    """C's row pitch inside the guarded buffer: the guards on both sides, rounded up to 64-byte rows."""
    return -(-(n + 2 * GUARD) // GUARD) * GUARD


def gemm_in_pitch(m: int, n: int, k: int, pitch: int) -> tvm.IRModule:
    """The float32 GEMM workload's module with C's rows ``pitch`` floats apart (a view into a wider buffer)."""

    @I.ir_module
    class Gemm:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((m, k), "float32"), B: T.Buffer((k, n), "float32"),
                 C: T.Buffer((m, n), "float32", strides=(pitch, 1))):
            T.func_attr({"global_symbol": "main", "tirx.noalias": True})
            for i, j, r in T.grid(m, n, k):
                with T.sblock("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, r])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    return Gemm


def run_guarded(mod: tvm.IRModule, size: tuple[int, int, int]) -> np.ndarray:
    """Run ``mod`` (C with a pitch of ``pitch_for(n)``) on llvm on seeded inputs, C a view into a buffer with GUARD
    rows above and below it and at least GUARD columns left and right, filled with SENTINEL; return that buffer."""
    m, n, k = size
    a, b = gemm(m, n, k).make_inputs(np.random.default_rng(0))
    big = np.from_dlpack(tvm.runtime.empty((m + 2 * GUARD, pitch_for(n)), "float32"))   # 64-byte aligned
    big[:] = SENTINEL
    c = tvm_ffi.from_dlpack(big[GUARD:GUARD + m, GUARD:GUARD + n], require_alignment=64, require_contiguous=False)
    build(mod, cpu_target())["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
    return big


def guards_touched(big: np.ndarray, m: int, n: int) -> int:
    """How many cells outside the m x n view no longer hold SENTINEL."""
    inside = np.zeros(big.shape, dtype=bool)
    inside[GUARD:GUARD + m, GUARD:GUARD + n] = True
    return int(np.count_nonzero(big[~inside] != SENTINEL))


@pytest.mark.parametrize("size", [(1, 7, 9), (37, 130, 20), (130, 131, 17)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", SIMT)
def test_padded_stores_stay_inside_c(name, size):
    """Guard cells on every side of C keep their sentinel after the padded kernel ran (on llvm, threads in turn),
    and C inside them is right."""
    m, n, k = size
    mod = gemm_in_pitch(m, n, k, pitch=pitch_for(n))
    big = run_guarded(without_threads(mod, schedule(name, size, mod)), size)
    wl = gemm(m, n, k)
    check_output(wl, big[GUARD:GUARD + m, GUARD:GUARD + n], wl.reference(*wl.make_inputs(np.random.default_rng(0))),
                 what=f"{name}: C inside the guards")
    assert guards_touched(big, m, n) == 0


def test_guards_catch_a_store_past_the_last_column():
    """The guard check fails a kernel that writes one column more than C has (it lands in the guards)."""
    m, n, k = 5, 6, 4
    pitch = pitch_for(n)

    @I.ir_module
    class Overflow:
        @T.prim_func
        def main(A: T.Buffer((m, k), "float32"), B: T.Buffer((k, n), "float32"),
                 C: T.Buffer((m, n), "float32", strides=(pitch, 1))):
            T.func_attr({"global_symbol": "main", "tirx.noalias": True})
            for i, j in T.grid(m, n + 1):
                C[i, j] = A[i, 0] * B[0, 0]

    assert guards_touched(run_guarded(Overflow, (m, n, k)), m, n) == m


# -- a proof over the lowered loop nest, for every rung (the tensor-core ones cannot run on llvm) --------------------
def lowered(mod: tvm.IRModule) -> tirx.PrimFunc:
    """``main`` after TVM's CUDA lowering up to (not including) buffer flattening: block predicates have become ifs,
    the software pipeline is in place, indices are still (row, column)."""
    passes = [s_tir.transform.CanonicalizeLoop(), s_tir.transform.LowerCrossThreadReduction(),
              s_tir.transform.LowerInitBlock(), s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
              s_tir.transform.ConvertBlocksToOpaque(), s_tir.transform.LiftThreadBinding(),
              s_tir.transform.CompactBufferAllocation(), s_tir.transform.LowerMatchBuffer(),
              s_tir.transform.InjectSoftwarePipeline(), s_tir.transform.LowerOpaqueBlock()]
    return tvm.transform.Sequential(passes)(tirx.transform.BindTarget(cuda_target())(mod))["main"]


_IF_THEN_ELSE = tvm.ir.Op.get("prim.if_then_else")
_LEAVES = (tirx.Var, tirx.IntImm, tirx.FloatImm, tvm.ir.expr.StringImm)


class BoundsProof:
    """Walks a lowered function, binding loop and thread ranges and assuming each if's (and ``if_then_else``'s)
    condition in its branches; lists every access to the named buffers whose indices it cannot prove inside the
    buffer's shape. A node it does not know fails the walk (rather than skipping accesses inside it)."""

    def __init__(self, buffers: tuple[str, ...]):
        self.buffers, self.ana, self.unproven, self.checked = buffers, Analyzer(), [], 0
        self.bounds: list[tirx.LT] = []   # the "x < y" terms of the conditions in force

    def proves(self, fact) -> bool:
        return self.ana.can_prove(self.ana.canonical_simplify(fact))

    def below(self, value, extent) -> bool:
        """value < extent, by the analyzer or through a condition in force x < y with value <= x and y <= extent
        (the analyzer does not always see that a predicate bounds the very index it guards)."""
        return self.proves(value < extent) or any(self.proves(value <= c.a) and self.proves(c.b <= extent)
                                                  for c in self.bounds)

    def access(self, buf: tirx.Buffer, indices) -> None:
        if buf.name not in self.buffers:
            return
        self.checked += 1
        for idx, extent in zip(indices, buf.shape):
            lo, hi = (idx.base, idx.base + idx.stride * (idx.lanes - 1)) if isinstance(idx, tirx.Ramp) else (idx, idx)
            if not (self.proves(lo >= 0) and self.below(hi, extent)):
                self.unproven.append(f"{buf.name}{list(indices)}")
                return

    def branches(self, cond, then, otherwise, visit) -> None:
        self.expr(cond)
        terms = [cond]
        while any(isinstance(t, tirx.And) for t in terms):
            terms = [part for t in terms for part in ((t.a, t.b) if isinstance(t, tirx.And) else (t,))]
        bounds = [t for t in terms if isinstance(t, tirx.LT)]
        self.bounds += bounds
        with self.ana.constraint_scope(self.ana.canonical_simplify(cond)):
            visit(then)
        del self.bounds[len(self.bounds) - len(bounds):]
        if otherwise is not None:
            with self.ana.constraint_scope(self.ana.canonical_simplify(tirx.Not(cond))):
                visit(otherwise)

    def expr(self, e) -> None:
        if isinstance(e, tvm.ir.Call) and e.op.same_as(_IF_THEN_ELSE):
            self.branches(*e.args, self.expr)
            return
        if isinstance(e, tvm.ir.expr.TensorLoad):   # a buffer load (``tirx.BufferLoad`` makes one)
            self.access(e.source, e.indices)
            kids = e.indices
        elif isinstance(e, tvm.ir.Call):
            kids = e.args
        elif isinstance(e, tirx.Ramp):
            kids = [e.base, e.stride]
        elif isinstance(e, tirx.Select):
            kids = [e.condition, e.true_value, e.false_value]
        elif isinstance(e, (tirx.Cast, tirx.Broadcast)):
            kids = [e.value]
        elif isinstance(e, tirx.Not):
            kids = [e.a]
        elif hasattr(e, "a") and hasattr(e, "b"):   # arithmetic and comparisons
            kids = [e.a, e.b]
        elif isinstance(e, _LEAVES):
            kids = []
        else:
            raise TypeError(f"BoundsProof: unknown expression {type(e).__name__}")
        for kid in kids:
            self.expr(kid)

    def stmt(self, s) -> None:
        if isinstance(s, tirx.SeqStmt):
            for part in s:
                self.stmt(part)
        elif isinstance(s, tirx.For):
            self.ana.bind(s.loop_var, tvm.ir.Range.from_min_extent(s.min, s.extent))
            self.stmt(s.body)
        elif isinstance(s, tirx.AttrStmt):
            if s.attr_key in ("thread_extent", "virtual_thread"):
                self.ana.bind(s.node.var, tvm.ir.Range(0, s.value))
            self.stmt(s.body)
        elif isinstance(s, tirx.IfThenElse):
            self.branches(s.condition, s.then_case, s.else_case, self.stmt)
        elif isinstance(s, (tirx.LetStmt, tirx.Bind)):
            self.expr(s.value)
            self.ana.bind(s.var, s.value)
            if isinstance(s, tirx.LetStmt):
                self.stmt(s.body)
        elif isinstance(s, tirx.BufferStore):
            self.access(s.buffer, s.indices)
            for part in (s.value, *s.indices):
                self.expr(part)
        elif isinstance(s, tirx.Evaluate):
            self.expr(s.value)
        elif isinstance(s, tirx.DeclBuffer) and hasattr(s, "body"):
            self.stmt(s.body)
        elif not isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer)):
            raise TypeError(f"BoundsProof: unknown statement {type(s).__name__}")


def unproven_accesses(mod: tvm.IRModule, buffers: tuple[str, ...] = ("A", "B", "C")) -> tuple[list[str], int]:
    """Accesses of ``buffers`` in ``mod``'s lowered kernel not proven in bounds, and how many were checked."""
    proof = BoundsProof(buffers)
    proof.stmt(lowered(mod).body)
    return proof.unproven, proof.checked


def unproven_without_guards(mod: tvm.IRModule, buffers: tuple[str, ...]) -> list[str]:
    """The accesses of ``buffers`` not proven in bounds once every ``if`` of ``mod``'s lowered kernel is replaced by
    its then-branch: non-empty where the proof rests on the kernel's predicates."""
    unguarded = tvm_ffi.structural_map(tvm.IRModule({"main": lowered(mod)}), (tirx.IfThenElse, lambda s: s.then_case))
    proof = BoundsProof(buffers)
    proof.stmt(unguarded["main"].body)
    return proof.unproven


@pytest.mark.parametrize("size", [(1, 7, 9), (2000, 3000, 1000), (37, 4096, 4096)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", RUNGS)
def test_every_access_of_a_b_c_is_proven_in_bounds(name, size):
    unproven, checked = unproven_accesses(schedule(name, size).mod)
    assert checked >= 3 and not unproven, unproven[:3]


def test_bounds_proof_flags_an_unguarded_access():
    @I.ir_module
    class Overflow:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((5, 4), "float32"), B: T.Buffer((4, 6), "float32"), C: T.Buffer((5, 6), "float32")):
            T.func_attr({"global_symbol": "main", "tirx.noalias": True})
            for i, j in T.grid(5, 7):
                with T.sblock("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj % 6] = A[vi, 0] * B[0, vj]

    unproven, checked = unproven_accesses(Overflow)
    assert checked == 3 and unproven == ["B[0, j]"]


@pytest.mark.parametrize("name", ["v5_warp_tiled", "v8_wgmma"])
def test_bounds_proof_needs_the_padding_predicates(name):
    """With the ifs around the stores of C dropped, the proof fails on C: it rests on the predicates."""
    assert unproven_without_guards(schedule(name, (2000, 3000, 1000)).mod, ("C",))


# -- divisible shapes unchanged, hardware limits still one line --------------------------------------------------
@pytest.mark.parametrize("name", RUNGS)
def test_divisible_shapes_are_not_padded(name):
    """Where the tiles divide, no pad_einsum runs and no padded buffer appears in the CUDA (the code is the one the
    helpers generated before they could pad)."""
    sch = schedule(name, (1024, 1024, 1024))
    assert "pad_einsum" not in str(sch.trace)
    assert "_pad" not in cuda(name, sch)


def test_only_the_axes_a_tile_misses_are_padded():
    """k alone not dividing pads A and B, not C: the stores of C stay the unpadded ones."""
    script = schedule("v8_wgmma", (1024, 1024, 1000)).mod.script()
    assert "A_pad_shared" in script and "B_pad_shared" in script and "C_pad" not in script


def _big(dtype: str = "float32") -> s_tir.Schedule:
    return s_tir.Schedule(gemm(2000, 3000, 1000, dtype).mod)


@pytest.mark.parametrize("call, message", [
    (lambda: gemm_v5_warp_tiled(_big(), block_tile=(256, 512)), "threads per block"),
    (lambda: gemm_v5_warp_tiled(_big(), tile_k=0), "tile_k must be a positive integer"),
    (lambda: gemm_v8_wgmma(_big("float16"), block_tile=(128, 256), stages=5), "shared memory"),
    (lambda: gemm_v8_wgmma(s_tir.Schedule(gemm(37, 4096, 4096, "float16").mod), raster=8), "raster=8"),
    (lambda: gemm_v6_wmma(_big("float16"), block_tile=(256, 256), warp_tile=(128, 128)),
     "stages C's block tile in shared memory"),
])
def test_hardware_limits_stay_one_line_errors(call, message):
    with pytest.raises(ValueError, match=message) as err:
        call()
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("record", [V5_WARP_TILED, V8_WGMMA], ids=lambda r: r.name)
def test_notebook_padded_candidates_build_and_divide_the_nearest_divisible_shape(record):
    """What notebook 03 times at its padded sizes (``padded(record, M)``) schedules, and each tile divides
    ``divisible_shape``."""
    assert set(PADDED) == {V5_WARP_TILED.name, V8_WGMMA.name}
    for size in [(2000, 3000, 1000), (1000, 1000, 1000), (37, 4096, 4096)]:
        candidates = padded(record, size[0]).candidates
        assert candidates and (size[0] > 64 or all(c["block_tile"][0] == 64 for c in candidates))
        for cand in candidates:
            params = record.params(cand)
            assert all(e % t == 0 for e, t in zip(divisible_shape(size), (*params["block_tile"], params["tile_k"])))
            assert "pad_einsum" in str(record.apply(gemm(*size, dtype_of(record.name)), cand).trace)
