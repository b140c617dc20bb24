"""The TIR pipeline the suite compiles with: TVM's default, plus zero-filling cp.async for integer tiles, fewer
barriers in overlapped wgmma loops, and L1-caching fills where a schedule asks for them.

With ``tirx.use_async_copy``, TVM turns a 16-byte global -> shared copy into ``cp.async``, and a padded copy
``shared[i:i+16] = if_then_else(inside, X[j:j+16], 0)`` into a predicated, zero-filling ``cp.async`` (the
im2col fill of an implicit-GEMM convolution). TVM 0.27 recognises that zero only as a float constant: for int8
tiles the copy stays a vector store of an int8x16 ``if_then_else``, which the CUDA code generator then prints as
an invalid ``make_int4`` of 16 bytes (and a 4- or 8-byte one as a synchronous load). ``PIPELINE`` ("tirbench")
runs TVM's default pipeline and then rewrites those stores into the same predicated ``cp.async`` node TVM emits for
half tiles (``tirx.s_tir.cp_async_raw``). They sit between the software pipeline's commit/wait groups already, so
they join the group that follows them, as TVM's own would. Without ``use_async_copy`` (Turing's synchronous int8
fills) the copy stays a select, and only its zero is rewritten: the int8x16 zero, which TVM declares as ``int4``,
becomes an ``int4`` of four int32 zeros (``make_int4(0, 0, 0, 0)``).

Before TVM's pipeline, ``split_lane_divisions`` rewrites the divisions in blocks a schedule marks ``LANE_DIVISIONS``
so that TVM's vectorizer keeps their 16-byte copies (an im2col fill whose k tiles span kernel taps).
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

PIPELINE = "tirbench"
#: Function attribute of a kernel written in TIRx (``T.device_entry``, tile primitives such as TMA copies) rather
#: than scheduled: ``pipeline_for`` compiles it with TVM's ``tirx`` pipeline, which lowers those.
TIRX_KERNEL = "tirbench.tirx_kernel"
#: Loop annotation (``sch.annotate(loop, L1_FILL, 1)``) on a global -> shared fill: its 16-byte cp.async copies go
#: through L1 (``cp.async.ca``) instead of around it (``.cg``, what TVM prints for every 16-byte copy). For im2col
#: fills, whose rows the next k tiles read again (the next kernel column is the same pixels shifted by one).
L1_FILL = "pragma_tirbench_l1_fill"
#: Block annotation (``sch.annotate(block, LANE_DIVISIONS, lanes)``) on a fill vectorized ``lanes`` wide whose indices
#: divide by multiples of ``lanes`` that its k tile does not divide (an im2col fill whose k tile of 64 spans the 80
#: channels of Inception's taps: k // 240 for the kernel row, k % 80 for the channel). TVM simplifies such a
#: division before it vectorizes, with the vector lane still a scalar, and cannot drop the lane from it
#: (floordiv(64 * kt + 8 * chunk + lane, 240)); the vectorizer then sees a predicate that varies across the vector and
#: copies one element at a time. ``split_lane_divisions`` writes x // d as (x // lanes) // (d / lanes) and x % d as
#: (x // lanes) % (d / lanes) * lanes + x % lanes, the same values, in which the lane drops out of every division.
LANE_DIVISIONS = "tirbench.lane_divisions"
_CA_COPY = "tirbench_cp_async_ca_16"
_CP_ASYNC = tvm.ir.Op.get("tirx.s_tir.cp_async_raw")
_IF_THEN_ELSE = tvm.ir.Op.get("prim.if_then_else")
_BYTES = 16
#: The sizes of a cp.async copy (4 and 8 bytes always cache in L1: ``.ca``).
_COPY_BYTES = (4, 8, 16)
_STORAGE_SYNC = tvm.ir.Op.get("tirx.tvm_storage_sync")
_WAIT_GROUP = tvm.ir.Op.get("tirx.ptx.cp_async_wait_group")
_CTA_SYNC = tvm.ir.Op.get("tirx.cuda.cta_sync")


def _is_zero(value: tirx.PrimExpr) -> bool:
    if isinstance(value, tirx.Broadcast):
        value = value.value
    return isinstance(value, tirx.IntImm) and value.value == 0


def _base(index: tirx.PrimExpr) -> tirx.PrimExpr | None:
    """The first element of a contiguous vector index (a unit-stride Ramp, or Ramp + Broadcast)."""
    if isinstance(index, tirx.Ramp) and int(index.stride) == 1:
        return index.base
    if isinstance(index, tirx.Add) and isinstance(index.a, tirx.Ramp) and isinstance(index.b, tirx.Broadcast) \
            and int(index.a.stride) == 1:
        return index.a.base + index.b.value
    return None


def _zero_fill_copy(store: tirx.BufferStore) -> tirx.Stmt:
    """``store`` as a predicated cp.async (4, 8 or 16 bytes) when it is a zero-padded int copy global -> shared;
    else itself."""
    value = store.value
    if store.buffer.scope() not in ("shared", "shared.dyn") or not isinstance(value, tvm.ir.Call) \
            or not value.op.same_as(_IF_THEN_ELSE) or not _is_zero(value.args[2]):
        return store
    load = value.args[1]  # a BufferLoad (``tvm.ir.expr.TensorLoad``): ``source`` is the buffer
    if not isinstance(load, tvm.ir.expr.TensorLoad) or load.source.scope() != "global" or len(load.indices) != 1 \
            or len(store.indices) != 1 or not str(load.source.dtype).startswith(("int", "uint")):
        return store
    vector = tvm.DataType(str(load.ty))
    nbytes = vector.lanes * vector.bits // 8
    if vector.lanes == 1 or nbytes not in _COPY_BYTES:
        return store
    src, dst = _base(load.indices[0]), _base(store.indices[0])
    if src is None or dst is None:
        return store
    # the node TVM's InjectPTXAsyncCopy emits for a predicated copy: (dst, dst offset, src, src offset, bytes,
    # predicate), offsets in elements of its type
    return tirx.Evaluate(tvm.ir.Call(_CP_ASYNC, [store.buffer.data, dst, load.source.data, src, nbytes,
                                                 value.args[0]], ret_ty=tvm.ir.PrimType(str(load.source.dtype))))


def _int8_vector_zero(value: tirx.Broadcast) -> tirx.PrimExpr:
    """A zero int8x16 as four int32 zeros reinterpreted (printed ``make_int4(0, 0, 0, 0)``, the ``int4`` TVM declares
    int8x16 as; TVM prints the int8x16 zero as a ``make_int4`` of 16 one-byte arguments, which nvcc rejects); any
    other value unchanged."""
    dtype = tvm.DataType(str(value.ty))
    if dtype.bits != 8 or dtype.lanes != 16 or not _is_zero(value):
        return value
    return tirx.reinterpret(str(value.ty), tirx.Broadcast(tirx.const(0, "int32"), 4))


def _call(stmt: tirx.Stmt, op: tvm.ir.Op) -> tvm.ir.Call | None:
    if isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tvm.ir.Call) and stmt.value.op.same_as(op):
        return stmt.value
    return None


def _drop_subsumed_wait(attr: tirx.AttrStmt) -> tirx.Stmt:
    """The software pipeline's wait before a k tile (``cp.async.wait_group(inflight)`` then a barrier) when the
    tile's own code waits right after it with a smaller count and a barrier of its own (the overlapped wgmma
    kernels, whose tile must wait for its own copies): the second wait is the stricter, and nothing but that
    thread-local wait lies between the two barriers, so the first pair only costs a barrier per k tile."""
    inner = attr.body
    if attr.attr_key != "async_wait_queue_scope" or not isinstance(inner, tirx.AttrStmt) \
            or inner.attr_key != "async_wait_inflight_count" or not isinstance(inner.body, tirx.SeqStmt):
        return attr
    seq = list(inner.body.seq)
    wait = _call(seq[1], _WAIT_GROUP) if len(seq) > 2 else None
    if _call(seq[0], _STORAGE_SYNC) is None or wait is None or _call(seq[2], _CTA_SYNC) is None \
            or int(wait.args[0]) > int(inner.value):
        return attr
    return tirx.SeqStmt(seq[1:])


def _ca_copy(stmt: tirx.Evaluate) -> tirx.Stmt:
    """A 16-byte ``cp_async_raw`` as a call of the ``.ca`` helper ``_CA_SOURCE`` defines (same operands, offsets in
    bytes); anything else unchanged."""
    call = stmt.value
    if not isinstance(call, tvm.ir.Call) or not call.op.same_as(_CP_ASYNC) or int(call.args[4]) != _BYTES:
        return stmt
    dst, dst_off, src, src_off = call.args[:4]
    scale = tvm.DataType(str(call.ty)).bits // 8
    pred = call.args[5] if len(call.args) == 6 else tirx.const(1, "int32")
    return tirx.Evaluate(tirx.call_extern("void", _CA_COPY, dst, dst_off * scale, src, src_off * scale, pred))


def _l1_fill(attr: tirx.AttrStmt) -> tirx.Stmt:
    """The body of an ``L1_FILL`` region with its 16-byte cp.async copies caching in L1."""
    if attr.attr_key != L1_FILL:
        return attr
    return tvm_ffi.structural_map(attr.body, (tirx.Evaluate, _ca_copy))


_CA_SOURCE = f"""
__forceinline__ __device__ void {_CA_COPY}(void* dst, int dst_off, void* src, int src_off, int predicate) {{
  unsigned int dst_addr = __cvta_generic_to_shared((uint8_t*)dst + dst_off);
  asm volatile("{{\\n .reg .pred p;\\n setp.ne.u32 p, %2, 0;\\n"
               " @p cp.async.ca.shared.global [%0], [%1], 16;\\n"
               " @!p st.shared.v4.u32 [%0], {{%3, %3, %3, %3}};\\n}}\\n"
               :: "r"(dst_addr), "l"((uint8_t*)src + src_off), "r"(predicate), "r"(0));
}}
"""


@tvm_ffi.register_global_func("tvm_callback_cuda_postproc", override=True)
def _add_helpers(code: str, target: object = None) -> str:
    """TVM's hook on the CUDA source before it is compiled: define the ``.ca`` copy where a kernel calls it."""
    if _CA_COPY not in code:
        return code
    at = code.index('extern "C" __global__')
    return code[:at] + _CA_SOURCE + "\n" + code[at:]


def _on_cuda(func: object) -> bool:
    """Whether ``func`` is a PrimFunc compiled for a CUDA device (its "target" attribute, set by SplitHostDevice)."""
    target = func.attrs.get("target") if isinstance(func, tirx.PrimFunc) and func.attrs is not None else None
    return target is not None and target.kind.name == "cuda"


@tvm.transform.module_pass(opt_level=0, name="tirbench.ZeroFillIntCopies")
def zero_fill_int_copies(mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
    """With ``tirx.use_async_copy``: rewrite every zero-padded integer 4-, 8- or 16-byte copy into shared memory as
    a predicated cp.async (the int8 kernels pipeline every such fill, so a commit/wait group follows each), make the
    copies of ``L1_FILL`` loops cache in L1, and drop the pipeline's waits that a k tile's own stricter wait makes
    redundant (``_drop_subsumed_wait``). Without it: print the zero of an int8 vector as CUDA takes it
    (``_int8_vector_zero``) in the CUDA kernels."""
    if not bool(ctx.config.get("tirx.use_async_copy", False)):
        out = mod.clone()
        for gv, func in mod.functions.items():
            if _on_cuda(func):
                out.update_func(gv, tvm_ffi.structural_map(func, (tirx.Broadcast, _int8_vector_zero)))
        return out
    mod = tvm_ffi.structural_map(mod, (tirx.BufferStore, _zero_fill_copy))
    mod = tvm_ffi.structural_map(mod, (tirx.AttrStmt, _l1_fill))
    return tvm_ffi.structural_map(mod, (tirx.AttrStmt, _drop_subsumed_wait))


def _split_at_lanes(expr: tirx.FloorDiv | tirx.FloorMod, lanes: int) -> tirx.PrimExpr:
    """``expr`` (x // d or x % d, d a constant multiple of ``lanes`` past it) in terms of x // lanes and x % lanes."""
    d = expr.b
    if not isinstance(d, tirx.IntImm) or d.value <= lanes or d.value % lanes:
        return expr
    high = tirx.floordiv(expr.a, lanes)
    if isinstance(expr, tirx.FloorDiv):
        return tirx.floordiv(high, d.value // lanes)
    return tirx.floormod(high, d.value // lanes) * lanes + tirx.floormod(expr.a, lanes)


def _split_block_divisions(block: s_tir.SBlock) -> s_tir.SBlock:
    """A ``LANE_DIVISIONS`` block with its divisions split at the vector's lanes; any other block unchanged."""
    lanes = block.annotations.get(LANE_DIVISIONS)
    if lanes is None:
        return block
    body = tvm_ffi.structural_map(block.body, ((tirx.FloorDiv, tirx.FloorMod),
                                               lambda e: _split_at_lanes(e, int(lanes))))
    return s_tir.SBlock(block.iter_vars, block.reads, block.writes, block.name_hint, body, block.init,
                        block.alloc_buffers, block.match_buffers, block.annotations)


@tvm.transform.module_pass(opt_level=0, name="tirbench.SplitLaneDivisions")
def split_lane_divisions(mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
    """Rewrite the divisions of every ``LANE_DIVISIONS`` block (see there); a module without one is returned as is."""
    return tvm_ffi.structural_map(mod, (s_tir.SBlock, _split_block_divisions))


def _pipeline_factory():
    default, finalize_host, finalize_device = tvm.tirx.get_tir_pipeline("default")
    return (tvm.transform.Sequential([split_lane_divisions, default, zero_fill_int_copies]), finalize_host,
            finalize_device)


tvm.tirx.register_tir_pipeline(PIPELINE, _pipeline_factory)


def pipeline_for(mod: tvm.IRModule) -> str:
    """The TIR pipeline ``mod`` compiles with: TVM's ``tirx`` for a kernel tagged ``TIRX_KERNEL``, else ``PIPELINE``."""
    tagged = any(func.attrs is not None and TIRX_KERNEL in func.attrs for func in mod.functions.values()
                 if isinstance(func, tirx.PrimFunc))
    return "tirx" if tagged else PIPELINE
