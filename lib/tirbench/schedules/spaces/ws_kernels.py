"""The warp-specialized kernels the ``wgmma`` design space can draw (``spaces.wgmma_space``: its pipeline decision),
and how a candidate that drew one is built as that kernel.

v9 (``gemm.tma_ws.gemm_v9_tma_ws``) and the warp-specialized convolution (``conv.tma_ws.conv2d_nhwc_tma_ws``) are
TIRx kernels written whole, not schedules of a workload's blocks, so no trace of MetaSchedule's primitives produces
them. A candidate that draws one is finished as a v8 stand-in whose root block carries the drawn kernel
(``SUBSTITUTE``: its name, the workload's geometry, the parameters, as JSON); ``as_built`` (the space's
``DesignSpace.as_built``) turns such a module into the kernel wherever a candidate is built: the tuner's builders and
``tuning.replay``. Here: the choices the design samples for each kernel (``WS_CHOICES``), the kernels' own checks
(``require_ws``) and builders (``ws_module``), by name.
"""
from __future__ import annotations

import json

from tvm import s_tir
from tvm.ir import IRModule

#: The pipeline: 0 v8's, 1 the warp-specialized kernel (``gemm_v9_tma_ws``, ``conv2d_nhwc_tma_ws``).
PIPELINES = (0, 1)
#: ... and the warp-specialized kernel's choices: ring depth, producer threads per im2col row, the gather through L1
#: (``cp.async.ca``) or not, persistent blocks (0: one block per tile; 132: one per SM of an H100 / H200).
WS_STAGES = (2, 3, 4, 5, 6, 7, 8)
WS_LANES = (1, 2, 4, 8)
WS_L1_GATHER = (0, 1)
WS_PERSISTENT = (0, 132)
#: Annotations on the product block for those (read and removed by ``finish_wgmma``), and the workload's geometry as
#: JSON (a GEMM's m, n, k and C's dtype; a convolution's ``conv.tma_ws.conv_geometry``).
PIPELINE, WS_STAGES_KEY, WS_LANES_KEY = "tirbench.wgmma_pipeline", "tirbench.ws_stages", "tirbench.ws_lanes"
WS_L1_KEY, WS_PERSISTENT_KEY, GEOMETRY = "tirbench.ws_l1_gather", "tirbench.ws_persistent", "tirbench.ws_geometry"
#: The warp-specialized kernels, by helper name, and the choices the design samples for each (annotation, candidates),
#: in order, with the keyword each sets.
GEMM_WS, CONV_WS = "gemm_v9_tma_ws", "conv2d_nhwc_tma_ws"
WS_CHOICES = {GEMM_WS: ((WS_STAGES_KEY, WS_STAGES), (WS_PERSISTENT_KEY, WS_PERSISTENT)),
              CONV_WS: ((WS_STAGES_KEY, WS_STAGES), (WS_LANES_KEY, WS_LANES), (WS_L1_KEY, WS_L1_GATHER),
                        (WS_PERSISTENT_KEY, WS_PERSISTENT))}
WS_KEYWORDS = {WS_STAGES_KEY: "stages", WS_LANES_KEY: "lanes", WS_L1_KEY: "l1_gather",
               WS_PERSISTENT_KEY: "persistent_ctas"}
#: Root-block annotation of a candidate built as another kernel (``as_built``): JSON {"kernel", "geometry",
#: "params"}.
SUBSTITUTE = "tirbench.substitute"


def ws_kernel(geometry: dict) -> str:
    """The warp-specialized kernel for a workload's ``geometry``: v9 on a GEMM (it has an ``m``), else the
    convolution's."""
    return GEMM_WS if "m" in geometry else CONV_WS


def ws_record(kernel: str):
    """The hand kernel's record (its defaults, candidates and pass config)."""
    from tirbench.schedules.conv.records import NHWC_TMA_WS
    from tirbench.schedules.gemm.records import V9_TMA_WS

    return {GEMM_WS: V9_TMA_WS, CONV_WS: NHWC_TMA_WS}[kernel]


def require_ws(kernel: str, geometry: dict, params: dict) -> None:
    """The kernel's own one-line checks of ``params`` on the workload of ``geometry`` (``require_v9``; the
    convolution's adds its own)."""
    if kernel == GEMM_WS:
        from tirbench.schedules.gemm.tma_ws import require_v9

        require_v9(geometry["m"], geometry["n"], geometry["k"], "float16",
                   **{key: params[key] for key in ("block_tile", "stages", "consumers", "persistent_ctas",
                                                   "tma_store")})
    else:
        from tirbench.schedules.conv.tma_ws import require_conv_ws

        require_conv_ws(geometry, dtype="float16", **{key: v for key, v in params.items() if key != "l1_gather"})


def ws_module(kernel: str, geometry: dict, params: dict) -> IRModule:
    """The TIRx kernel ``kernel`` with ``params`` for the workload of ``geometry``, as its helper builds it."""
    params = {**params, "block_tile": tuple(params["block_tile"])}
    if kernel == GEMM_WS:
        from tirbench.schedules.gemm.tma_ws import v9_kernel

        func = v9_kernel(geometry["m"], geometry["n"], geometry["k"], out_dtype=geometry["out_dtype"], **params)
    elif kernel == CONV_WS:
        from tirbench.schedules.conv.tma_ws import conv_ws_kernel

        func = conv_ws_kernel(geometry, "float16", **params)
    else:
        raise ValueError(f"{SUBSTITUTE}: unknown kernel {kernel!r}")
    return IRModule({"main": func})


def substitute_spec(mod: IRModule) -> dict | None:
    """The kernel a candidate module stands for (``SUBSTITUTE``'s JSON: kernel, geometry, params), or None."""
    mains = [func for gv, func in mod.functions.items() if gv.name_hint == "main"]
    root = mains[0].body.block if mains and isinstance(mains[0].body, s_tir.SBlockRealize) else None
    if root is None or SUBSTITUTE not in root.annotations:
        return None
    return json.loads(str(root.annotations[SUBSTITUTE]))


def as_built(mod: IRModule, pass_config: dict[str, object]) -> tuple[IRModule, dict[str, object]]:
    """The module a candidate of the wgmma space is built as, and its PassContext config: where the candidate drew the
    warp-specialized pipeline (its root block annotated ``SUBSTITUTE``), that TIRx kernel with the drawn parameters
    and its record's config (the hand kernel's, byte for byte: ``ws_module``); else ``mod`` and ``pass_config`` as
    they are."""
    spec = substitute_spec(mod)
    if spec is None:
        return mod, pass_config
    return ws_module(spec["kernel"], spec["geometry"], spec["params"]), dict(ws_record(spec["kernel"]).pass_config)
