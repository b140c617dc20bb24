"""Every tensor intrinsic a kernel of this suite can name, registered at once (a worker process that builds or
replays tensor-core kernels calls ``import_tensor_intrin`` first)."""
from __future__ import annotations


def import_tensor_intrin() -> None:
    """Register TVM's CUDA tensor intrinsics (importing ``tvm.s_tir.tensor_intrin``: a few seconds a process, 20-40 s
    before ``core.frames``), the wmma fragment shapes TVM does not register (a tuned wmma-space trace names them), the
    wgmma intrinsics a wgmma-space candidate can name (its tuned traces name them too), and the integer wgmma shapes
    with N = 256 (a worker process that generates the code of an int8 128x256 tile needs them in its own PTX
    table)."""
    from tirbench.core.frames import name_frame_files

    name_frame_files()   # first: the import below parses ~500 prim_funcs, ~10x faster so (see core.frames)
    import tvm.s_tir.tensor_intrin  # noqa: F401

    from tirbench.schedules.intrinsics.wgmma import allow_integer_n256, register_space_intrins
    from tirbench.schedules.intrinsics.wmma import register_wmma_intrins
    register_wmma_intrins()
    register_space_intrins()
    allow_integer_n256()
