"""Any M, N, K for the tiled GEMM helpers: the iteration space is padded up to the tiles, the tensors never are.

When a tile does not divide its extent, ``pad_to_tiles`` applies ``pad_einsum`` to the GEMM block: the block then
runs over M, N, K rounded up to the tiles, reading A and B through "pad" blocks that give zero outside them and
writing a padded C that a "crop" block copies back. The helper schedules the padded block as it would a divisible
one, then ``Padding`` folds the pad blocks away, so no padded copy of A, B or C ever exists in global memory:

- the input pad blocks are inlined into the shared-memory fills (``inline_inputs``): each fill becomes a
  predicated copy, a zero-filling ``cp.async`` where the copy was asynchronous (TVM turns a float
  ``if_then_else(inside, X[...], 0)`` copy into one);
- the output crop is either inlined into the SIMT kernels' register write-back (``store_direct``: each store of C
  predicated), or, for the tensor-core kernels, whose stores are tensor intrinsics that cannot take a predicate,
  the accumulators go to a shared-memory tile of C first and a predicated copy writes it out
  (``store_through_shared``; TVM reuses the pipeline's shared memory for that tile); where C already is a
  shared-memory tile that a caller's epilogue reads (the implicit-GEMM convolutions), the crop is inlined into that
  epilogue (``fold_into_consumer``), which then stores only the real rows and columns.

Predicates come out uniform over a 16-byte vector exactly when the rows of the tensor it reads or writes are 16-byte
aligned (a multiple of 4 floats or 8 halves long): TVM then keeps the vector copy, else it falls back to element
copies (correct, slower). Divisible shapes are not touched: ``pad_to_tiles`` returns an empty ``Padding`` and the
generated code is the same as before.
"""
from __future__ import annotations

from dataclasses import dataclass

from tvm import s_tir

from tirbench.schedules.common.checks import loop_extent, require_positive_int
from tirbench.schedules.common.tiling import MAX_SHARED_BYTES, Warps, split_threads

#: Floats of padding per row of the shared C tile: the tensor-core stores of 8 rows x 8 floats then fall on
#: different banks (with 128-float rows all 8 rows would share the same ones).
C_ROW_PAD = 8


def padded_extents(sch: s_tir.Schedule, block: str, tiles: tuple[int, int, int],
                   params: tuple[str, str, str]) -> tuple[int, int, int]:
    """The block's (m, n, k) extents (its last three loops; loops before them are batch loops) rounded up to
    multiples of ``tiles`` (ValueError naming ``params`` for a tile that is not a positive integer)."""
    for tile, param in zip(tiles, params):
        require_positive_int(tile, param=param)
    extents = (loop_extent(sch, loop) for loop in sch.get_loops(sch.get_sblock(block))[-3:])
    return tuple(-(-extent // tile) * tile for extent, tile in zip(extents, tiles))


def require_shared_c(block_tile: tuple[int, int], mn: tuple[int, int]) -> None:
    """ValueError when the block tile does not divide the GEMM's (m, n) and the float32 C tile that
    ``store_through_shared`` stages (rows padded by ``C_ROW_PAD``) does not fit in shared memory. (It reuses the
    pipeline's buffers, so it only has to fit by itself.)"""
    (bm, bn), (m, n) = block_tile, mn
    nbytes = bm * (bn + C_ROW_PAD) * 4
    if (m % bm or n % bn) and nbytes > MAX_SHARED_BYTES:
        raise ValueError(f"block_tile={block_tile}: a shape it does not divide (m={m}, n={n}) stages C's block tile "
                         f"in shared memory, {nbytes} bytes, more than {MAX_SHARED_BYTES}")


@dataclass(frozen=True)
class Padding:
    """The blocks ``pad_einsum`` added: the input pad blocks (``inputs``) and the output crop (``output``); and
    whether the padded C was moved to shared memory for ``store_through_shared`` (``through_shared``)."""

    inputs: tuple[str, ...] = ()
    output: str | None = None
    through_shared: bool = False

    def inline_inputs(self, sch: s_tir.Schedule) -> None:
        """Inline the input pad blocks into their consumers (the helper's shared-memory fills)."""
        for name in self.inputs:
            sch.compute_inline(sch.get_sblock(name))

    def store_direct(self, sch: s_tir.Schedule) -> None:
        """``inline_inputs``, and inline the crop into the block that writes C from registers: each store predicated."""
        self.inline_inputs(sch)
        if self.output:
            sch.reverse_compute_inline(sch.get_sblock(self.output))

    def fold_into_consumer(self, sch: s_tir.Schedule) -> None:
        """``inline_inputs``, and inline the crop into the block that reads C, for a caller whose C is in shared
        memory (the convolutions' epilogues): that block then reads the padded tile, its loops still over the real
        extents, so its rows past them are never written out."""
        self.inline_inputs(sch)
        if self.output:
            sch.compute_inline(sch.get_sblock(self.output))

    def finish(self, sch: s_tir.Schedule, warps: Warps) -> None:
        """After a tensor-core helper: ``store_through_shared`` where ``pad_to_tiles`` moved the padded C to shared
        memory (C in global memory), else ``fold_into_consumer``. ``warps``: a count or split factors (``Warps``)."""
        if self.through_shared:
            self.store_through_shared(sch, warps)
        else:
            self.fold_into_consumer(sch)

    def store_through_shared(self, sch: s_tir.Schedule, warps: Warps) -> None:
        """``inline_inputs``, and copy the block tile of C (in shared memory, rows padded by ``C_ROW_PAD``) to C
        after the main loop: ``warps`` x 32 threads, each a 16-byte predicated store per step (narrower when C's
        rows are not a multiple of 4 floats)."""
        self.inline_inputs(sch)
        if not self.output:
            return
        crop = sch.get_sblock(self.output)
        tile_store, = sch.get_producers(crop)
        sch.storage_align(tile_store, 0, axis=0, factor=32, offset=C_ROW_PAD)
        n = int(sch.get(crop).writes[0].source.shape[1])
        vector = next(v for v in (4, 2, 1) if n % v == 0)
        sch.reverse_compute_at(crop, sch.get_loops(tile_store)[0])  # the block-index loop
        *rows, cols = sch.get_loops(crop)[1:] or [sch.add_unit_loop(crop)]  # (unit loops are dropped: 1 x 1 C)
        cols, vec = sch.split(cols, factors=[None, vector])
        split_threads(sch, sch.fuse(*rows, cols), warps)
        sch.vectorize(vec)


def pad_to_tiles(sch: s_tir.Schedule, block: str, tiles: tuple[int, int, int], *,
                 shared_output: bool = False) -> Padding:
    """Pad the GEMM block's (m, n, k) iteration space up to multiples of ``tiles`` with ``pad_einsum`` where a tile
    does not divide its extent; loops before the block's last three are batch loops (a batched GEMM), never padded.
    ``shared_output``: the padded C is put in shared memory (for ``store_through_shared``). Returns the blocks to
    fold away once the helper has scheduled the padded block (an empty ``Padding`` when every tile divides)."""
    blk = sch.get_sblock(block)
    loops = sch.get_loops(blk)
    tiles = (1,) * (len(loops) - 3) + tuple(tiles)
    if all(loop_extent(sch, loop) % tile == 0 for loop, tile in zip(loops, tiles)):
        return Padding()
    stmt = sch.get(blk)
    names = [region.source.name for region in (*stmt.reads, *stmt.writes)]
    sch.pad_einsum(blk, list(tiles))
    added = {sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root"))}
    inputs = tuple(f"{name}_pad" for name in names[:-1] if f"{name}_pad" in added)
    output = f"{names[-1]}_pad" if f"{names[-1]}_pad" in added else None
    if output and shared_output:
        sch.set_scope(blk, 0, "shared.dyn")
    return Padding(inputs, output, through_shared=bool(output and shared_output))
