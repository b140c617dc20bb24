"""``core.build`` makes TVM's NVRTC compiles use the automatic precompiled header, unless the user set NVRTC's extra
options themselves."""
import os
import subprocess
import sys

from tirbench.core import build


def _options_after_import(env: dict[str, str]) -> str:
    code = "import os, tirbench.core.build; print(os.environ['TVM_CUDA_NVRTC_EXTRA_OPTS'])"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_nvrtc_compiles_with_the_precompiled_header_unless_the_user_chose_options():
    env = {k: v for k, v in os.environ.items() if k != "TVM_CUDA_NVRTC_EXTRA_OPTS"}
    assert _options_after_import(env) == build.NVRTC_OPTIONS == "--pch"
    assert _options_after_import({**env, "TVM_CUDA_NVRTC_EXTRA_OPTS": "--ftz=false"}) == "--ftz=false"
