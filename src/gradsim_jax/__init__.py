"""gradsim-jax: differentiable simulation and rendering in JAX. Recover the physical parameters of cloth,
rigid bodies, FEM soft bodies and ODE bodies (pendulums, a bouncing ball, your own) from video (system identification, `gradsim_jax.sysid`), and train the
controls that make them reach a target image (`gradsim_jax.control`), through the physics and the renderer.

The handful of names most users need:

    import gradsim_jax as gs
    topology, params, state0 = gs.cloth_grid(20, 10, 0.1, 0.1, fix_left=True).build()
    trajectory = gs.simulate(topology, params, state0, frames=60)   # substeps: gs.stable_substeps(...)
    camera = gs.look_at_camera(3.0, 20.0, 0.0, width=128, height=128)
    video = gs.render_video(camera, trajectory.particles.x, topology.cloth.triangles)   # [61, 128, 128, 4]

`gs.jit` is `jax.jit` with the XLA options gradsim-jax runs best with (`gradsim_jax.compilation`).

Conventions: SI units, y up, gravity (0, -9.81, 0) m/s^2; positions [n, 3]; quaternions (w, x, y, z);
images [H, W, 4] float RGBA in [0, 1], row 0 at the top; videos [T, H, W, 4].
"""

from gradsim_jax.geometry import (
    Scene, box_mesh, box_tets, cloth_grid, cloth_mesh, collider, combine, load_mesh, particles, quat_from_axis_angle,
    rigid_body, ode_body, pendulum, soft_body, sphere_mesh,
)
from gradsim_jax.physics import (
    Control, Params, SimulationDiverged, State, SubstepsChosen, Topology, check_finite, first_nonfinite, particle_state,
    simulate, stable_substeps,
)
from gradsim_jax.physics import euler_step as step
from gradsim_jax.physics import FunctionOde, OdeSolver
from gradsim_jax.render import Camera, RenderSettings, look_at_camera, render, render_video
from gradsim_jax.fit import FitResult, fit, fit_batched
from gradsim_jax.diagnostics import gradcheck, gradient_horizon, loss_landscape
from gradsim_jax.compilation import jit

from gradsim_jax.version import __version__  # noqa: E402

__all__ = [
    "Camera", "Control", "FitResult", "Params", "gradcheck", "gradient_horizon", "loss_landscape", "RenderSettings", "Scene", "SimulationDiverged", "State",
    "Topology", "box_mesh", "box_tets", "check_finite", "cloth_grid", "cloth_mesh", "collider", "combine", "first_nonfinite", "fit",
    "fit_batched", "jit",
    "load_mesh", "rigid_body", "soft_body", "sphere_mesh", "pendulum", "ode_body", "FunctionOde", "OdeSolver",
    "look_at_camera", "particle_state", "particles", "quat_from_axis_angle", "render", "render_video", "simulate", "stable_substeps", "SubstepsChosen", "step",
]
