"""System identification from video: recover the physical quantities of cloth, rigid bodies and soft bodies
(masses, stiffnesses, damping, friction, restitution, initial velocities, shapes, the camera's pose) by
gradient descent through simulation and rendering (gradSim, Jatavallabhula et al., ICLR 2021, section 4),
and fit initial controls to a target image.

Split by job:

identification proper
  quantities  the registry of estimable quantities (name, Params field, unit, transform, how a value
              expands to per-element arrays) and `assemble`, theta -> (Params, State0); `registry`, `builtin`
  experiment  the frozen `Experiment` (what a recording is), its motion and video, compiled functions
  losses      image losses, pixel residuals, the loss of a theta (`make_loss`, `residual_with_target`)
  config      `FitConfig` (how to fit, in grouped records), `SysIdResult` (what a fit returns), `fit_inputs`
  bounds      stable step bounds of the quantities (the explicit integrator's limit)
  rounds      one round: Adam (`gradsim_jax.fit.fit`) then the polish (`RoundResult`, `FitHistory`)
  polish      Levenberg-Marquardt on the pixel residuals (forward-mode Jacobian)
  edges       the blur and edge-model measurements of the target
  identify    the composition of the stages (`identify`)
  restarts    N random starts fitted at once over the devices
  control     gradSim's control_cloth: an initial velocity fitted to a target image
  smoke       2-D smoke from video: `SmokeExperiment`, its quantities (buoyancy, inflow, initial velocity)
              and `fit_smoke`
  runner      one complete run: fit, videos, report (`run`), and initial guesses (`perturbed`)
windows/      windowed fits of long recordings: `windowed` (multiple shooting, truncated backpropagation),
              `shooting` (its Gauss-Newton polish), `starts` and `runs` (window start states), `truncated`
renderer_fits/  the renderer alone: `texture` (a mesh's texture from pictures: `fit_texture`, `psnr`) and
              `shape` (a mesh's shape from silhouettes: `fit_shape`, `silhouette_iou`, `chamfer_distance`)
outputs/      what a fit leaves: `report` (report.json), `html` (report.html), `files` (videos, the output
              folder), `plots`, `summary` (the console summary)
"""

from gradsim_jax.fit import gauss_newton_report
from gradsim_jax.sysid.control import control_loss, final_position_error, fit_control, silhouette_moments
from gradsim_jax.sysid.experiment import (
    ARRAY_FIELDS, STATIC_FIELDS, Experiment, as_theta, split_data, with_data, compiled, experiment_arrays,
    frames_at, frames_for, motion, render_frames, static_structure, rollout, trajectory, vertices, video,
    with_arrays
)
from gradsim_jax.sysid.simulated import simulate_vertices, simulate_video
from gradsim_jax.sysid.config import (
    AdamOptions,
    CheckpointOptions,
    EdgeOptions,
    FitConfig,
    FrameOptions,
    LM_MAX_SCALARS,
    ObjectiveOptions,
    OutputOptions,
    REPORT_MAX_SCALARS,
    StageOptions,
    SysIdResult,
    check_config,
    fit_inputs,
)
from gradsim_jax.sysid.identify import identify
from gradsim_jax.sysid.losses import (
    LOSSES,
    horizon_weights,
    image_loss,
    make_loss,
    make_residual,
    residual_with_target,
)
from gradsim_jax.sysid.polish import levenberg_marquardt
from gradsim_jax.sysid.quantities import (
    KNOWN_INPUTS,
    QUANTITIES,
    Quantity,
    assemble,
    camera_for,
    canonical,
    canonical_theta,
    default_theta,
    register,
    transforms_for,
    with_camera_pose,
)
from gradsim_jax.sysid.outputs.files import (
    FIT_OUTPUTS, check_inputs_kept, ensure_writable_folder, outputs_line, write_outputs
)
from gradsim_jax.sysid.outputs.report import package_versions, build_report, pose_error, relative_error, write_report
from gradsim_jax.sysid.outputs.summary import convergence_lines, summary_lines
from gradsim_jax.sysid.outputs.plots import plot_loss, plot_params
from gradsim_jax.sysid.runner import perturbed, run
from gradsim_jax.sysid.smoke import (
    SMOKE_QUANTITIES,
    SmokeExperiment,
    fit_smoke,
    simulate_smoke_video,
    smoke_loss,
    smoke_report,
    smoke_theta,
    smoke_video,
)
from gradsim_jax.sysid.renderer_fits.shape import (
    ShapeExperiment, chamfer_distance, fit_shape, render_silhouettes, silhouette_iou
)
from gradsim_jax.sysid.renderer_fits.texture import TextureExperiment, fit_texture, psnr, render_views
from gradsim_jax.sysid.windows.windowed import WindowedFitResult, fit_windowed, windowed_loss, windowed_terms

__all__ = [
    "AdamOptions", "CheckpointOptions", "EdgeOptions", "FrameOptions", "ObjectiveOptions", "OutputOptions",
    "StageOptions",
    "SMOKE_QUANTITIES", "SmokeExperiment", "fit_smoke", "simulate_smoke_video", "smoke_loss", "smoke_report",
    "smoke_theta", "smoke_video", "TextureExperiment", "fit_texture", "psnr", "render_views",
    "ShapeExperiment", "chamfer_distance", "fit_shape", "render_silhouettes", "silhouette_iou",
    "ARRAY_FIELDS", "KNOWN_INPUTS", "LM_MAX_SCALARS", "LOSSES", "QUANTITIES", "REPORT_MAX_SCALARS", "STATIC_FIELDS",
    "Experiment", "FitConfig", "Quantity", "SysIdResult", "assemble", "build_report", "camera_for", "canonical",
    "canonical_theta",
    "check_config", "compiled", "control_loss", "default_theta", "ensure_writable_folder", "experiment_arrays",
    "outputs_line", "check_inputs_kept", "FIT_OUTPUTS", "convergence_lines",
    "final_position_error", "fit_control", "fit_inputs", "gauss_newton_report", "horizon_weights", "identify",
    "image_loss", "levenberg_marquardt", "make_loss", "make_residual", "perturbed", "plot_loss", "plot_params",
    "pose_error", "register", "relative_error", "frames_at", "frames_for", "motion", "render_frames", "residual_with_target", "rollout", "run",
    "silhouette_moments", "simulate_vertices", "simulate_video", "static_structure", "summary_lines", "trajectory", "transforms_for", "vertices",
    "video", "WindowedFitResult", "fit_windowed", "windowed_loss", "windowed_terms", "with_arrays", "with_camera_pose", "write_outputs", "write_report",
]
