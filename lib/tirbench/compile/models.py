"""Whole torchvision models through Relax, with and without the conv rules, against PyTorch (issue 44; notebook 09,
``tools/gpu-checks/relax_models.py``): the models, their runs and variants, PyTorch's side, and the check.

A model (``build_model``: random weights from ``seed``, batch-norm statistics calibrated on one random batch:
torchvision's random init shrinks MobileNetV2's activations to 1e-9, under float16's range; eval mode) runs per
``ModelConfig`` (a dtype, a batch, the layout TVM keeps between layers). TVM's variants (``TvmVariant``:
``tvm_default``, TVM's default pipeline with DLight; ``tvm_rules``, the conv rules' dispatch; a whole-model
MetaSchedule database applied, ``tuning.relax_model``) are compiled by ``compile.model_builds``; PyTorch's here, in
the config's dtype (``torch_variants``): eager (cuDNN, TF32 off) in NCHW and channels-last, and ``torch.compile``
(default mode; skipped with one line where there is no Triton).

Every variant is checked against the float32 PyTorch model on the same input (``check``: ``rel_diff``, max
|difference| / max |reference|, within ``tolerance(dtype)``), then timed as the suite's harness times kernels
(``timed``: ``harness.time_launches``, the median of the repeats, one call of the whole model each between CUDA
events, the same 256 MiB L2 flush before each call for every variant). torch is imported where it is used: a
machine without it still reads the recorded results (``compile.model_results``).
"""
from __future__ import annotations

import copy
import dataclasses
import importlib.util
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
import tvm

from tirbench.bench.harness import Timing, last_line, time_launches

#: The models the notebook runs (any torchvision classification model's builder name works with ``build_model``).
MODELS = ("resnet50", "mobilenet_v2")
#: float32 end to end, relative to the output's largest magnitude: dozens of layers, each summing in another order than
#: cuDNN's (llvm builds of both models, rules on, agree with PyTorch on a CPU to about 1e-6).
RTOL = 1e-3
#: float16 against the float32 model: each layer rounds its weights and its output to half precision (unit roundoff
#: u = 2**-11), errors that add up over the depth. Measured on a CPU (torch 2.13, the calibrated models, PyTorch
#: float16 against float32, max |difference| / max |reference|): ResNet-50 3.7e-2 (76 u) at batch 1, 3.2e-2 (67 u) at
#: batch 32; MobileNetV2 1.2e-2 (25 u) and 1.7e-2 (34 u). The tolerance is 2x the largest, 150 u = 7.3e-2: a kernel
#: that reads a wrong element or layout is off by about the output's own magnitude.
FP16_RTOL = 150 * 2.0 ** -11


def tolerance(dtype: str) -> float:
    """The largest ``rel_diff`` a variant of a ``dtype`` model may have: ``RTOL`` or ``FP16_RTOL``."""
    tolerances = {"float32": RTOL, "float16": FP16_RTOL}
    if dtype not in tolerances:
        raise ValueError(f"dtype {dtype!r}: expected float32 or float16")
    return tolerances[dtype]


def rel_diff(out: np.ndarray, ref: np.ndarray) -> float:
    """max |out - ref| / max |ref|, in float64."""
    return float(np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max())


@dataclass(frozen=True)
class ModelConfig:
    """One run of a model: its dtype, batch and the layout TVM's variants keep between layers (NCHW or NHWC)."""

    name: str
    dtype: str
    batch: int
    layout: str

    @property
    def fp16(self) -> bool:
        return self.dtype == "float16"

    @property
    def tolerance(self) -> float:
        return tolerance(self.dtype)

    def label(self) -> str:
        return f"{self.dtype} batch {self.batch}, TVM {self.layout}"


#: The notebook's runs: batch 1 in float32 (NCHW, the fp32 families' layout), batch 32 in float16 (NHWC between
#: layers, the tensor-core families' layout: no transposes around their kernels).
CONFIGS = {"fp32": ModelConfig("fp32", "float32", 1, "NCHW"), "fp16": ModelConfig("fp16", "float16", 32, "NHWC")}


@dataclass(frozen=True)
class TvmVariant:
    """A TVM build of a model: ``rules`` (the conv rules' dispatch in the passes), ``finish(mod, target)``: a last
    rewrite of the passed module before ``compile_passed`` (None: none), ``provider`` of its result rows."""

    name: str
    rules: bool
    provider: str = "tvm"
    finish: Callable[[tvm.IRModule, tvm.target.Target], tvm.IRModule] | None = None


TVM_VARIANTS = (TvmVariant("tvm_default", rules=False), TvmVariant("tvm_rules", rules=True))
#: PyTorch's variants, each with the layout its tensors have.
TORCH_LAYOUTS = {"torch_eager": "NCHW", "torch_eager_channels_last": "NHWC", "torch_compile": "NCHW"}


# -- measuring -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VariantResult:
    """One variant of one model and config: its layout, ``rel_diff`` against the float32 model and whether it is
    within the config's tolerance (``verified``), its timing (None where unchecked, failed or not timed), ``error``
    (its compile's or run's line), and for TVM's variants what the dispatch did and ``split`` (``kernel_split``)."""

    model: str
    config: ModelConfig
    variant: str
    provider: str
    layout: str
    max_rel_diff: float = float("nan")
    verified: bool = False
    timing: Timing | None = None
    error: str = ""
    convs_dispatched: int = 0
    convs: int = 0
    transposes: int = 0
    split: dict[str, float] | None = None


def check(model: str, config: ModelConfig, variant: str, provider: str, layout: str,
          run: Callable[[], np.ndarray], ref: np.ndarray, **extra: object) -> VariantResult:
    """``run()``'s output checked against ``ref`` within ``config.tolerance``; a failing run is its ``error``."""
    try:
        diff = rel_diff(run(), ref)
    except Exception as err:  # noqa: BLE001 - torch.compile or a kernel failing here: say it, go on
        return VariantResult(model, config, variant, provider, layout, error=last_line(err), **extra)
    return VariantResult(model, config, variant, provider, layout, diff, diff <= config.tolerance, **extra)


def timed(result: VariantResult, call: Callable[[], object], *, repeats: int, flush: bool) -> VariantResult:
    """``result`` with ``call`` timed by ``harness.time_launches`` where it is verified."""
    if not result.verified:
        return result
    return dataclasses.replace(result, timing=time_launches(call, repeats=repeats, flush=flush))


# -- PyTorch's side (torch imported where used: a machine without it can still read the results) ------------------
def calibrate(model, x):
    """``model`` in eval mode, each batch norm's statistics those of one batch ``x`` (see the module docstring)."""
    import torch

    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None   # a cumulative average: after one batch, that batch's statistics
    model.train()
    with torch.no_grad():
        model(x)
    return model.eval()


def build_model(name: str, batch: int, seed: int = 0):
    """torchvision's ``name`` with random weights from ``seed``, calibrated (``calibrate``), and a random input batch
    of ``batch`` 224x224 images: the same model and input in every process. One-line ValueError for a name
    torchvision has no builder of."""
    import torch
    import torchvision

    builder = getattr(torchvision.models, name, None)
    if not callable(builder) or name.startswith("_"):
        raise ValueError(f"torchvision has no model {name!r} (e.g. {', '.join(MODELS)})")
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = calibrate(builder(weights=None), torch.randn(8, 3, 224, 224, generator=gen))
    return model, torch.randn(batch, 3, 224, 224, generator=gen)


def small_model(seed: int = 0):
    """A model small enough to read in Relax and to run on llvm: a 3x3 conv + batch norm + ReLU on a 3-channel
    16x16 image, a residual block (3x3 conv + batch norm, the shortcut added, ReLU), global average pooling and a
    linear classifier; calibrated (``calibrate``), with its input."""
    import torch
    from torch import nn

    class Small(nn.Module):
        def __init__(self, c: int = 16):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU())
            self.conv, self.bn, self.head = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.Linear(c, 10)

        def forward(self, x):
            y = self.stem(x)
            y = torch.relu(self.bn(self.conv(y)) + y)
            return self.head(y.mean((2, 3)))

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    return calibrate(Small(), torch.randn(8, 3, 16, 16, generator=gen)), torch.randn(1, 3, 16, 16, generator=gen)


def export_relax(model, x) -> tvm.IRModule:
    """``model`` on ``x``, ``torch.export``-ed and imported into Relax (weights bound as constants)."""
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    with warnings.catch_warnings():   # torch.export's own FutureWarnings (its pytree internals), not the model's
        warnings.simplefilter("ignore", FutureWarning)
        exported = torch.export.export(model, (x,))
    return from_exported_program(exported, keep_params_as_input=False)


def model_size(model, x) -> tuple[int, int]:
    """The FLOPs of one call of ``model`` on ``x`` (torch's ``FlopCounterMode``: 2 per multiply-add of each conv and
    matmul) and the parameters' element count."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(x)
    return int(counter.get_total_flops()), sum(p.numel() for p in model.parameters())


def torch_variants(model, x, dtype: str) -> dict[str, Callable[[], object]]:
    """PyTorch's variants on ``model`` and ``x`` (on the GPU, float32) in ``dtype``: name -> call (``TORCH_LAYOUTS``);
    ``torch.compile`` skipped with one line where Triton is missing. ``model`` itself is left as it is."""
    import torch

    eager = copy.deepcopy(model).half() if dtype == "float16" else model
    xs = x.half() if dtype == "float16" else x
    last = copy.deepcopy(eager).to(memory_format=torch.channels_last)
    x_last = xs.to(memory_format=torch.channels_last)
    out = {"torch_eager": lambda: eager(xs), "torch_eager_channels_last": lambda: last(x_last)}
    if importlib.util.find_spec("triton") is None:
        print("torch.compile: skipped (no Triton here)")
    else:
        compiled = torch.compile(eager)
        out["torch_compile"] = lambda: compiled(xs)
    return out


@dataclass
class TorchRun:
    """One model and config on PyTorch's side, on the GPU: the input (float32, numpy), the float32 model's output
    (float64: every variant's reference), the model's FLOPs and parameter count (``model_size``), its variants'
    calls (``torch_variants``) and their results, checked (``check``) and not yet timed (``time_torch``)."""

    model: str
    config: ModelConfig
    x: np.ndarray
    ref: np.ndarray
    flops: int
    params: int
    calls: dict[str, Callable[[], object]]
    results: list[VariantResult]


def prepare_torch(name: str, config: ModelConfig, *, seed: int = 0) -> TorchRun:
    """``build_model`` on the GPU (cuDNN and matmuls without TF32; cuDNN's autotuner on, as for any fixed-shape
    inference: each conv's algorithm is timed at its first call, not picked by heuristics), its reference output and its
    variants checked (``torch.compile`` compiles here, at its first call)."""
    import torch

    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    model, x = build_model(name, config.batch, seed)
    with torch.no_grad():
        model, x_gpu = model.cuda(), x.cuda()
        ref = model(x_gpu).double().cpu().numpy()
        flops, params = model_size(model, x_gpu)
        calls = torch_variants(model, x_gpu, config.dtype)
        results = [check(name, config, variant, "torch", TORCH_LAYOUTS[variant],
                         lambda call=call: call().float().cpu().numpy(), ref) for variant, call in calls.items()]
    return TorchRun(name, config, x.numpy(), ref, flops, params, calls, results)


def time_torch(run: TorchRun, *, repeats: int, flush: bool) -> list[VariantResult]:
    """``run``'s checked variants timed (``timed``)."""
    import torch

    with torch.no_grad():
        return [timed(r, run.calls[r.variant], repeats=repeats, flush=flush) for r in run.results]
