"""Pick the device and numeric precision for training and inference: CUDA with bf16 when
present, otherwise the CPU in fp32."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hardware:
    """What to run on and how: used to set trainer arguments so user code never changes."""

    device: str  # "cuda" or "cpu"
    bf16: bool
    gradient_checkpointing: bool

    @property
    def torch_dtype(self):
        import torch

        return torch.bfloat16 if self.bf16 else torch.float32

    @property
    def lightning_precision(self) -> str:
        return "bf16-mixed" if self.bf16 else "32-true"

    @property
    def lightning_accelerator(self) -> str:
        return "gpu" if self.device == "cuda" else "cpu"


def detect_hardware(*, force_cpu: bool | None = None) -> Hardware:
    """CUDA (bf16 if the GPU supports it, gradient checkpointing on) or CPU (fp32, no
    checkpointing). ``LEANLOOP_DEVICE=cpu`` forces the CPU."""
    import torch

    if force_cpu is None:
        from leanloop.settings import Settings

        force_cpu = Settings.from_env().device == "cpu"
    if not force_cpu and torch.cuda.is_available():
        return Hardware("cuda", bf16=torch.cuda.is_bf16_supported(), gradient_checkpointing=True)
    return Hardware("cpu", bf16=False, gradient_checkpointing=False)


def limit_threads(count: int | None = None) -> None:
    """Set how many CPU threads torch uses.

    Args:
        count: The number of threads (at least one is used); ``None`` takes
            ``Settings.threads`` (``OMP_NUM_THREADS``), and leaves torch as it is when that is
            unset.

    Raises:
        LeanloopError: ``OMP_NUM_THREADS`` is not a whole number.
    """
    import torch

    if count is None:
        from leanloop.settings import Settings

        count = Settings.from_env().threads
        if count is None:
            return
    torch.set_num_threads(max(1, count))
