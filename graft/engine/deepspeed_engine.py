"""DeepSpeed ZeRO as the second sharded training engine beside FSDP2 (``scale.engine: deepspeed``).

Each model of a run is wrapped by ``deepspeed.initialize`` at ZeRO stage 2 or 3 with this project's own AdamW as a
client optimizer (no DeepSpeed op is compiled), gradient clipping by DeepSpeed at ``train.grad_clip``, and bf16
when the model's dtype is bfloat16. The update keeps its token-budgeted micro-batch plan: the engine is told
which backward pass closes the minibatch (``set_gradient_accumulation_boundary``), losses are not rescaled by
DeepSpeed (``scale_wrt_gas=False``), and DeepSpeed averages gradients over processes as FSDP does, so the
accumulated gradient equals the one-process gradient. Checkpoints use DeepSpeed's own sharded format for resume;
evaluation and the rollout engine get full weights gathered from every process.
"""

from __future__ import annotations

from pathlib import Path

import torch

from graft.errors import ConfigError

SHARED_MEMORY_OP = "deepspeed_shm_comm"
"""DeepSpeed's CPU shared-memory collective op, which this engine never builds."""

TAG = "state"
"""The tag of the one DeepSpeed checkpoint inside a checkpoint's ``<model>/sharded`` directory."""


def check_available() -> None:
    try:
        import deepspeed  # noqa: F401
    except ImportError as err:
        raise ConfigError(
            f"scale.engine: 'deepspeed' needs the deepspeed package ({err}); install it (DS_BUILD_OPS=0 pip install "
            "deepspeed, or the 'gpu' extra) or use scale.engine: fsdp2"
        ) from None


def engine_config(grad_clip: float, zero_stage: int, dtype: torch.dtype) -> dict:
    return {
        # the update accumulates micro-batches itself and marks the last one as the boundary
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": grad_clip,
        "bf16": {"enabled": dtype == torch.bfloat16},
        "zero_optimization": {
            "stage": zero_stage,
            "contiguous_gradients": True,
            "overlap_comm": False,
            "stage3_gather_16bit_weights_on_model_save": True,
        },
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }


def wrap(model: torch.nn.Module, optimizer: torch.optim.Optimizer, config: dict):
    """The DeepSpeed engine around ``model`` (which it shards in place) and its client ``optimizer``."""
    import deepspeed
    import deepspeed.ops

    # On the CPU accelerator DeepSpeed's communication layer JIT-compiles a shared-memory all-reduce for inference
    # when it starts. Training uses torch.distributed's collectives, so the op is marked unavailable: nothing is
    # compiled at run time and no native code beyond torch's runs.
    deepspeed.ops.__compatible_ops__[SHARED_MEMORY_OP] = False
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    return engine


def is_engine(obj) -> bool:
    return type(obj).__module__.startswith("deepspeed")


def save(engine, directory: Path) -> None:
    """Model and optimizer partitions of every process in DeepSpeed's format (collective)."""
    engine.save_checkpoint(str(directory), tag=TAG, save_latest=False)


def load(engine, directory: Path) -> None:
    path, _ = engine.load_checkpoint(str(directory), tag=TAG, load_module_strict=True)
    if path is None:
        raise ConfigError(f"--resume: {str(directory)!r} holds no DeepSpeed checkpoint")
