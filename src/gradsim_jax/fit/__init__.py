"""Fitting: the optimizers that recover physical parameters of cloth, rigid and soft bodies (and train
controls) by gradient descent through simulation and rendering; they know nothing of scenes, only of
loss functions and parameter trees (the scenes' losses come from `sysid`).

- `fit`: the jitted optax loop (free fields, positivity/bound transforms, clipping, NaN guard, history,
  progress, PRNG key, checkpoint and bitwise resume).
- `transforms`: physical <-> unconstrained maps ("log", "softplus", `Bounded`).
- `losses`: video losses (`rgba_mse`, `silhouette_loss`, `masked_mse`) and `sigma_schedule`.
- `batched`: `fit_batched`, N members (videos or random starts) at once, vmapped and sharded over devices.
- `identifiability`: `gauss_newton_report`, which parameter combinations the data determine.
- `windows`: how a long recording is cut for a windowed fit (`Windows`, `window_length_for`; the fit itself,
  `sysid.fit_windowed`, needs an experiment).
"""

from gradsim_jax.fit.checkpoint import (
    EXIT_PREEMPTED,
    Checkpoint,
    CheckpointError,
    CheckpointMismatch,
    FitState,
    Preempted,
    preemptible,
    request_stop,
    stop_requested,
    check_resume,
    checkpoint_path,
    content_sha256,
    load_checkpoint,
    save_checkpoint,
)
from gradsim_jax.fit.fit import FitBackoffWarning, FitDiverged, FitResult, cosine_schedule, fit
from gradsim_jax.fit.options import Checkpoints, LossCall, Optimization, Stopping
from gradsim_jax.fit.batched import BatchedFitResult, fit_batched, random_starts
from gradsim_jax.fit.identifiability import IdentifiabilityReport, gauss_newton_report
from gradsim_jax.fit.losses import (
    frame_subsample,
    masked_mse,
    random_frames,
    rgba_mse,
    sigma_schedule,
    silhouette_loss,
    soft_iou,
)
from gradsim_jax.fit.transforms import Bounded, Identity, Log, Softplus, Transform, resolve_transform
from gradsim_jax.fit.windows import Scaled, Windows, window_length_for

__all__ = [
    "EXIT_PREEMPTED", "Preempted", "preemptible", "request_stop", "stop_requested",
    "Checkpoints", "LossCall", "Optimization", "Stopping",
    "BatchedFitResult",
    "Bounded",
    "Checkpoint",
    "CheckpointError",
    "CheckpointMismatch",
    "FitBackoffWarning",
    "FitDiverged",
    "FitResult",
    "FitState",
    "IdentifiabilityReport",
    "Identity",
    "Log",
    "Softplus",
    "Transform",
    "Scaled",
    "Windows",
    "check_resume",
    "checkpoint_path",
    "content_sha256",
    "cosine_schedule",
    "fit",
    "fit_batched",
    "frame_subsample",
    "gauss_newton_report",
    "load_checkpoint",
    "masked_mse",
    "random_starts",
    "random_frames",
    "resolve_transform",
    "rgba_mse",
    "save_checkpoint",
    "sigma_schedule",
    "silhouette_loss",
    "soft_iou",
    "window_length_for",
]
