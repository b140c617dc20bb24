"""Schedule helpers: ``fn(sch, *, tile params) -> sch``, by family.

Each helper checks its parameters first and raises a one-line ValueError naming the parameter when a tile does not
divide the loop it splits, or a thread count or shared-memory size exceeds the device limit (the tiled GEMM rungs
v2..v8 and the implicit-GEMM convolutions pad instead: ``common.padding``). Families: ``gemm`` (the ladder: ``simt``,
``tensorcore``), ``conv`` (``direct``, ``template``, ``implicit_gemm``), ``intrinsics`` (wgmma, int8 ldmatrix),
``common`` (checks, tiling, padding), ``elementwise``, ``window``.
"""
