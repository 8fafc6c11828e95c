"""Where and at which precision a seed trains and predicts."""

from __future__ import annotations

import platform
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import torch

from seedvar.errors import DeviceError

if TYPE_CHECKING:  # the GPU check (benchmarks/gpu.py) imports this module without pydantic
    from seedvar.config import Config

AUTOCAST = {"32": None, "bf16": torch.bfloat16, "16": torch.float16}


Precision = Literal["32-true", "bf16-mixed", "16-mixed"]  # Lightning's names
EvalPrecision = Literal["32", "bf16", "16"]
MIXED_EVAL: dict[Precision, EvalPrecision] = {"bf16-mixed": "bf16", "16-mixed": "16"}


# the oldest NVIDIA driver of each CUDA major version (CUDA's release notes, "minor version
# compatibility"): torch built for CUDA 13 needs a 580 driver or newer
OLDEST_DRIVER = {"11": "450", "12": "525", "13": "580"}


def use_gpu(config: Config) -> bool:
    """True when a usable GPU is present and the config does not ask for the CPU."""
    return config.train.accelerator != "cpu" and torch.cuda.is_available()


def usable_gpus() -> int:
    """The GPUs seeds can train on: none where CUDA is unusable, even where the driver (NVML)
    counts some (`torch.cuda.device_count()` does, with a driver too old for torch's CUDA)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def native_gpu_bf16() -> bool:
    """Whether the GPU computes bf16 in its tensor cores (compute capability 8.0, Ampere, or
    newer). `torch.cuda.is_bf16_supported()` also counts emulation (T4, V100), where bf16-mixed
    runs slower than 16-mixed."""
    return torch.cuda.get_device_capability() >= (8, 0)


def cuda_problem() -> str | None:
    """Why torch cannot train on a GPU here (torch's build, the driver, their versions), or
    None where it can."""
    if torch.cuda.is_available():
        return kernel_problem()
    if torch.version.cuda is None:
        return (
            f"torch {torch.__version__} is a CPU build; build .venv from the GPU lock "
            "(`make study LOCK=gpu` rebuilds it)"
        )
    driver = nvidia_driver()
    needed = OLDEST_DRIVER.get(torch.version.cuda.split(".")[0], "a newer one")
    if driver is None:
        return (
            f"no NVIDIA driver answers (torch {torch.__version__} is built for CUDA "
            f"{torch.version.cuda}); install NVIDIA driver {needed} or newer, or check "
            "CUDA_VISIBLE_DEVICES"
        )
    return (
        f"NVIDIA driver {driver} cannot run torch {torch.__version__}, built for CUDA "
        f"{torch.version.cuda} (it needs driver {needed} or newer); update the driver, or "
        "install a torch built for the driver's CUDA into .venv"
    )


def kernel_problem() -> str | None:
    """Why torch has no kernels for this GPU (its compute capability is older than every
    architecture torch was built for), or None where it has: a binary for the same major and
    an equal or lower minor, or PTX for an equal or lower capability, runs."""
    major, minor = torch.cuda.get_device_capability()
    built = torch.cuda.get_arch_list()
    for arch in built:
        kind, _, number = arch.partition("_")
        if not number.isdigit():
            continue
        found = (int(number[:-1]), int(number[-1]))
        if (kind == "sm" and found[0] == major and found <= (major, minor)) or (
            kind == "compute" and found <= (major, minor)
        ):
            return None
    return (
        f"this GPU (compute capability {major}.{minor}, {torch.cuda.get_device_name()}) has no "
        f"kernels in torch {torch.__version__}, built for {', '.join(built)}; install a torch "
        "built for an older CUDA that lists it (the GPU lock targets CUDA 13: Turing, 7.5, and "
        "newer), or train on a newer GPU"
    )


def nvidia_driver() -> str | None:
    """The NVIDIA driver's version, from the kernel module or `nvidia-smi`; None without one."""
    proc = Path("/proc/driver/nvidia/version")
    if proc.is_file():
        words = proc.read_text().split()
        if "Kernel" in words and words.index("Kernel") + 3 < len(words):
            return words[words.index("Kernel") + 3]  # "... Kernel Module  580.95.05  ..."
    if smi := shutil.which("nvidia-smi"):
        query = [smi, "--query-gpu=driver_version", "--format=csv,noheader"]
        found = subprocess.run(query, capture_output=True, text=True, timeout=30)
        if found.returncode == 0 and found.stdout.strip():
            return found.stdout.split()[0]
    return None


def require_gpu(config: Config) -> None:
    """DeviceError, before any work, where the config must train on a GPU (train.accelerator:
    gpu, as the paper profile does) and CUDA is unusable: never train on the CPU by accident."""
    if config.train.accelerator == "gpu" and (problem := cuda_problem()):
        raise DeviceError(
            f"the {config.profile} profile trains on a GPU (train.accelerator: gpu) but CUDA "
            f"is unusable here: {problem}; or set train.accelerator=cpu to train on the CPU"
        )


def resolve_precision(config: Config) -> Precision:
    """`train.precision` made concrete: "auto" is bf16-mixed on GPUs that compute bf16 natively,
    16-mixed on older GPUs; on a CPU bf16-mixed where it computes bf16 natively, else 32-true
    (without native bf16 a CPU runs bf16 matmuls about 100x slower than fp32)."""
    if config.train.precision != "auto":
        return config.train.precision
    if use_gpu(config):
        return "bf16-mixed" if native_gpu_bf16() else "16-mixed"
    return "bf16-mixed" if native_cpu_bf16() else "32-true"


def on_this_machine(config: Config) -> Config:
    """The config with its "auto" precisions made concrete for this machine: what a seed
    trained here records as its recipe."""
    train = {
        "precision": resolve_precision(config),
        "eval_precision": resolve_eval_precision(config),
    }
    return config.model_copy(update={"train": config.train.model_copy(update=train)})


def checked_on_this_machine(config: Config) -> Config:
    """On a machine that trains seeds (a Ray task on a cluster's node): DeviceError unless it
    can train as the study asks (a GPU study: CUDA, and kernels for its GPU), else
    `on_this_machine`."""
    require_gpu(config)
    return on_this_machine(config)


def evaluation_device(config: Config) -> torch.device:
    """The device evaluation runs on (Lightning hands the model back on the CPU)."""
    return torch.device("cuda") if use_gpu(config) else torch.device("cpu")


def resolve_eval_precision(config: Config) -> EvalPrecision:
    """`train.eval_precision` made concrete: "auto" is the training's mixed precision on a GPU,
    bf16 on a CPU that computes it natively (avx512_bf16 or AMX), else 32."""
    if config.train.eval_precision != "auto":
        return config.train.eval_precision
    if use_gpu(config):
        return MIXED_EVAL.get(resolve_precision(config), "32")
    return "bf16" if native_cpu_bf16() else "32"


@cache
def native_cpu_bf16() -> bool:
    """Whether this CPU computes bf16 in hardware (x86 avx512_bf16 or AMX), read from the
    kernel's CPU flags (torch has no public call for it); False where there are none."""
    return bool({"avx512_bf16", "amx_bf16"} & set(_cpuinfo("flags").split()))


def _cpuinfo(field: str) -> str:
    """The first value of `field` in Linux's /proc/cpuinfo ("" where there is none)."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []
    return next((line.partition(":")[2].strip() for line in lines if line.startswith(field)), "")


def cpu_description() -> str:
    """The CPU's model and torch's vector capability, with native bf16 or not: for benchmark
    results and a seed's provenance."""
    model = _cpuinfo("model name") or platform.processor() or platform.machine()
    bf16 = "native bf16" if native_cpu_bf16() else "no native bf16"
    return f"{model} ({torch.backends.cpu.get_cpu_capability()}, {bf16})"


def slow_bf16_here(config: Config) -> str | None:
    """A warning when `config` asks for bf16 on a CPU that does not compute it natively, where
    it runs many times slower than fp32 (a training step 20-30x); None otherwise."""
    if use_gpu(config) or native_cpu_bf16():
        return None
    chosen = on_this_machine(config).train.model_dump(include={"precision", "eval_precision"})
    asked = [f"train.{name}={value}" for name, value in chosen.items() if value.startswith("bf16")]
    if not asked:
        return None
    return (
        f"{' and '.join(asked)} on a CPU without native bf16 ({cpu_description()}): bf16 runs "
        "many times slower than fp32 here (a training step 20-30x); 'auto' picks fp32"
    )


def autocast_dtype(config: Config) -> torch.dtype | None:
    """The autocast dtype evaluation runs under, or None for full precision."""
    return AUTOCAST[resolve_eval_precision(config)]


def device_name(config: Config) -> str:
    """The accelerator a seed runs on, for its provenance."""
    if use_gpu(config):
        return torch.cuda.get_device_name(0)
    return f"cpu {cpu_description()}, {torch.get_num_threads()} threads"
