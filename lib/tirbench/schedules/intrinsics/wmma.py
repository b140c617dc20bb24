"""wmma intrinsics of every fp16 fragment shape (m8n32k16, m16n16k16, m32n8k16; fp32 accumulators, C stored to
shared memory): TVM registers only m16n16k16 under its own names."""
from __future__ import annotations

#: wmma fragment shapes on half inputs: rows (im) -> columns (in); k is 16. TVM registers only 16x16x16.
WMMA_FRAGMENTS = {8: 32, 16: 16, 32: 8}


def wmma_intrins(im: int) -> dict[str, str]:
    """Register (once) the wmma intrinsics of fragment m{im}n{in}k16 (fp16 in, fp32 accumulators, C stored to
    shared memory); return their names by role."""
    from tvm.s_tir import TensorIntrin
    from tvm.s_tir.tensor_intrin import cuda as tc

    n = WMMA_FRAGMENTS[im]
    shape = f"m{im}n{n}k16"
    made = {"load_a": lambda: tc.get_wmma_load_intrin(im, n, 16, "float16", "shared.dyn", False, False),
            "load_b": lambda: tc.get_wmma_load_intrin(im, n, 16, "float16", "shared.dyn", True, False),
            "compute": lambda: tc.get_wmma_sync_intrin(im, n, 16, "float16", "float32", False),
            "init": lambda: tc.get_wmma_fill_intrin(im, n, 16, "float32"),
            "store": lambda: tc.get_wmma_store_intrin(im, n, 16, "float32", "shared.dyn")}
    names = {}
    for role, make in made.items():
        names[role] = f"tirbench_wmma_{role}_{shape}_f16f32"
        if TensorIntrin.get(names[role], allow_missing=True) is None:
            TensorIntrin.register(names[role], *make())
    return names


def register_wmma_intrins() -> None:
    """Register every fragment shape's intrinsics (a tuned wmma trace names them when it is replayed)."""
    for im in WMMA_FRAGMENTS:
        wmma_intrins(im)
