"""The built-in demos' catalogue: the scene each `gradsim-jax demo` builds for the quantities it estimates
(`demo_experiment` for the cloth, `rigid_demo_experiment`, `fem_demo_experiment`), and the demo tables
(help, description, default estimate, fit settings) that the command line and the benchmarks share."""

from __future__ import annotations

from typing import NamedTuple, Optional

DEMO_ESTIMATES = ("velocity", "mass", "stiffness", "damping", "bending", "drag", "lift", "friction")


RIGID_MATERIAL_ESTIMATES = ("body_mass", "body_ke", "body_kd", "body_kf", "body_mu")


class DemoEntry(NamedTuple):
    """A demo of RIGID_DEMOS, CONTACT_DEMOS or FEM_DEMOS (a named tuple: it unpacks in this order too).

    help: the one-line help of `gradsim-jax demo NAME`.
    description: what the demo's scene shows and what it fits (the command's description).
    estimate: the default --estimate, comma-separated quantities; None when the demo fits one fixed quantity.
    defaults: the demo's fit settings, `FitConfig` fields by name (`demo_fit_config`).
    """

    help: str
    description: str
    estimate: Optional[str]
    defaults: dict


class OdeDemoEntry(NamedTuple):
    """A demo of ODE_DEMOS: a `DemoEntry`'s fields and `start`.

    help: the one-line help of `gradsim-jax demo NAME`.
    description: what the demo's scene shows and what it fits.
    estimate: the default --estimate, comma-separated quantities.
    defaults: the demo's fit settings, `FitConfig` fields by name.
    start: {quantity: initial guess} (physical units), or None: --perturb's offset from the truth.
    """

    help: str
    description: str
    estimate: Optional[str]
    defaults: dict
    start: Optional[dict] = None


class ControlDemoEntry(NamedTuple):
    """A demo of CONTROL_DEMOS.

    help: what the demo trains (the command's help and description).
    frames: the frames it simulates by default.
    iterations: the Adam iterations it trains by default.
    """

    help: str
    frames: int
    iterations: int



#: The rigid demos (`DemoEntry`: help, description, default estimate or None for a fixed one, fit settings).
RIGID_DEMOS = {
    "rigid-mass": DemoEntry(
        "recover a box's mass from a rendered video (gradSim's demo_mass_known_shape)",
        "A box of known shape resting on the ground is pushed by a known force during the first frames, "
        "sliding and spinning (the push acts as F / m: it is what makes the mass visible). Fits body_mass.",
        None, {"iterations": 40, "polish": 15, "horizon": 6, "learning_rate": 0.05}),
    "rigid-material": DemoEntry(
        "recover a box's ground contact coefficients (penalty model: ke, kd, kf, mu) or mass",
        "A box starting level on the ground with a horizontal velocity and spin is pulled back by a known "
        "constant force (below mu m g, at mid-height so that it never tips): it slides against Coulomb "
        "friction (mu), stops and creeps back in the viscous regime at F / (4 kf) (kf); the known force "
        "separates mass from the contact coefficients, which otherwise act only as ke / m, kd / m, kf / m. "
        "Estimating only body_ke and/or body_kd, the scene is the first bounce of a level drop (where ke "
        "shows). Each coefficient alone (the others known, as in gradSim's Table 2) is "
        "recovered to below 1e-3 from 50 % off; the joint fit of all five is ill-conditioned (see the "
        "report's identifiability section). Default: body_ke.",
        "body_ke",
        {"iterations": 80, "polish": 20, "horizon": 8, "learning_rate": 0.1}),
    "rigid-restitution": DemoEntry(
        "recover a box's coefficient of restitution (impulse contact model)",
        "A level cube spinning about the vertical drops onto the ground and bounces several times; each "
        "bounce's apex is e^2 times the last. Fits restitution.",
        None, {"iterations": 30, "polish": 20, "horizon": 14, "learning_rate": 0.2}),
}


#: Quantities the contact demos estimate (each scene names its own subset).
CONTACT_ESTIMATES = ("body_mass", "body_mu", "body_kf", "bending", "collider_mu", "mass", "stiffness", "damping")

#: The contact demos (bodies against each other and against colliders), `DemoEntry`s; `contact_demo_experiment`
#: builds their scenes (`gradsim_jax.scenes.contact`).
CONTACT_DEMOS = {
    "stack": DemoEntry(
        "recover a box's mass and the friction between two boxes from a video of one dropped onto the other",
        "Two boxes of one mass and material: the upper one is dropped level onto the lower one, which stands "
        "on the ground, and a known force pushes it along the lower box's top for some frames; it slides and "
        "stops against the friction between them (penalty contact between the bodies). The push acts as F / m "
        "(the mass), the deceleration after it as mu g (the friction). Quantities: body_mass, body_mu, "
        "body_kf.",
        "body_mass,body_mu",
        {"iterations": 40, "polish": 20, "horizon": 12, "learning_rate": 0.1}),
    "drape": DemoEntry(
        "recover a cloth's bending stiffness and its friction on a sphere from a video of it draping over one",
        "A square cloth is released level above a sphere lying on the floor, off-centre: it lands, folds over "
        "the sphere, slides down it and settles over it and the floor (cloth against a static sphere "
        "collider, penalty contact with friction). How it folds shows the bending stiffness, how far it slides "
        "the friction on the sphere. Quantities: bending, collider_mu, mass, stiffness, damping.",
        "bending,collider_mu",
        {"iterations": 40, "polish": 20, "horizon": 12, "learning_rate": 0.1}),
    "lift": DemoEntry(
        "recover a cloth's mass and stiffness from a video of a moving rod lifting it off the floor by a corner",
        "A square cloth lies on the floor; a rod (a kinematic capsule collider moved by keyframes) rises from "
        "under the floor below one corner, lifts it 25 cm and holds it there, while the opposite "
        "edge is pulled outwards by a known force during the first frames (the pull acts as F / m and separates "
        "the mass from the stiffness: under gravity, the rod and the elastic forces alone only their ratio "
        "shows). Quantities: mass, stiffness, damping, bending, collider_mu.",
        "mass,stiffness",
        {"iterations": 40, "polish": 20, "horizon": 12, "learning_rate": 0.1}),
}


#: The control demos (`ControlDemoEntry`: help, default frames and iterations); `gradsim_jax.scenes.control`
#: runs them.
CONTROL_DEMOS = {
    "control-fem": ControlDemoEntry(
        "train a policy of tet activations that makes a gear-shaped soft body crawl to the pose a target image "
        "shows (gradSim's control_fem)", 45, 150),
    "control-cloth": ControlDemoEntry(
        "train a policy of corner forces that throws a cloth onto the spot a target image shows (gradSim's "
        "control_cloth, a policy instead of one initial velocity)", 40, 100),
    "control-walker": ControlDemoEntry(
        "train a gait: a policy of tet activations that makes a four-legged soft walker walk to the pose a target "
        "image shows (gradSim's control_walker)", 60, 100),
    "control-jellyfish": ControlDemoEntry(
        "train a swimming stroke: a policy of bending rest angles that makes a cloth jellyfish swim up to the "
        "height a target image shows, against quadratic drag (gradSim's control_jellyfish)", 60, 100),
}


FEM_MATERIAL_ESTIMATES = ("fem_mu", "fem_lambda", "fem_damping")


#: The FEM soft-body demos (`DemoEntry`: help, description, default estimate or None for a fixed one, fit
#: settings).
FEM_DEMOS = {
    "fem-material": DemoEntry(
        "recover a soft body's material (FEM: shear mu, volume lambda, damping) from a rendered video",
        "A soft box of tets (stable Neo-Hookean, known density) is dropped level onto the ground: it lands, "
        "squashes, bulges and wobbles. The squash and bulge show k_lambda and k_mu, the "
        "wobble's decay k_damp (gradSim's Table 3 material experiment). Default: all three, jointly.",
        ",".join(FEM_MATERIAL_ESTIMATES), {"iterations": 40, "polish": 10, "horizon": 10, "learning_rate": 0.1,
                                           "rounds": 5, "round_iterations": 20}),
    "fem-mass": DemoEntry(
        "recover every particle's mass of a soft body from a rendered video (gradSim's demo_fem)",
        "A soft box of tets thrown up in free fall, each particle pushed by its own known force during the "
        "first frames (F / m per particle is what shows its mass); the material is known. Fits "
        "particle_mass (one mass per particle) and reports their mean relative error: first a density field "
        "across the body (mass = density x each particle's volume; --density-first), then every mass on its own.",
        None, {"iterations": 300, "polish": 0, "horizon": None, "learning_rate": 0.01, "density_first": 100}),
}


ODE_ESTIMATES = {"pendulum": ("pendulum_length", "pendulum_damping", "bob_mass"),
                 "double-pendulum": ("pendulum_length", "pendulum_damping", "bob_mass"),
                 "bounce": ("ball_speed", "gravity", "ball_restitution", "ball_friction")}


#: The ODE-body demos (`physics.ode`), `OdeDemoEntry`s (help, description, default estimate, fit settings, start).
#: `start`: the initial guess of each quantity (None: --perturb's); the demos begin from the issue's stated guesses.
ODE_DEMOS = {
    "pendulum": OdeDemoEntry(
        "recover a pendulum's length and damping from 2 s of video (gradSim's demo_pendulum)",
        "A 1 m pendulum with a 1 kg bob and a joint damping of 0.05 N m s/rad is released from 0.8 rad and "
        "filmed for 2 s at 30 fps; its motion is an ODE in its angle, solved by Diffrax (Tsit5). Fits "
        "pendulum_length and pendulum_damping from 50 % off (--perturb).",
        "pendulum_length,pendulum_damping",
        {"iterations": 30, "polish": 10, "horizon": None, "learning_rate": 0.05}, None),
    "double-pendulum": OdeDemoEntry(
        "recover both arm lengths of a chaotic double pendulum from video (gradSim's demo_double_pendulum)",
        "gradSim's set-up: l1 = l2 = 1 m, m1 = m2 = 1 kg, g = 10 m/s^2, released at rest from (3 pi / 7, "
        "3 pi / 4) rad, 50 frames at 30 fps, filmed from 8 m. Fits both lengths starting from l1 = 1, l2 = 1.7 "
        "(--perturb instead: a relative offset of both).",
        "pendulum_length",
        {"iterations": 40, "polish": 10, "horizon": None, "learning_rate": 0.05},
        {"pendulum_length": [[1.0, 1.7]]}),
    "bounce": OdeDemoEntry(
        "recover a bouncing ball's launch speed and gravity (and restitution) from video (gradSim's demo_bounce2d)",
        "gradSim's set-up: a ball of radius 0.75 m released 5 m up at 1 m/s along x under g = -9 m/s^2; it "
        "bounces twice (restitution 0.8) in 100 frames at 30 fps, each impact solved exactly inside the step. "
        "Fits ball_speed and gravity from 3 m/s and -10 m/s^2 (add ball_restitution to --estimate to fit it "
        "too, from 0.6, with --iterations 60). The first 10 frames are fitted first, growing to all "
        "(--horizon): from 3 m/s the ball's later frames are far from the target's.",
        "ball_speed,gravity",
        {"iterations": 40, "polish": 10, "horizon": 10, "learning_rate": 0.05},
        {"ball_speed": 3.0, "gravity": -10.0, "ball_restitution": 0.6}),
}


def ode_demo_experiment(demo: str, free, *, size, frames=None):
    """The scene of the ODE-body demo `demo` estimating `free`.

    Args:
        demo: "pendulum", "double-pendulum" or "bounce".
        free: the estimated quantities (canonical names, among the demo's `ODE_ESTIMATES`).
        size: the image size in pixels.
        frames: the frames to simulate (None: the scene's own).

    Returns:
        the demo's `Experiment`.
    """
    from gradsim_jax.scenes import ode

    kw = _scene_kwargs(demo, free, ODE_ESTIMATES[demo], size=size, frames=frames)
    if demo == "pendulum":
        return ode.simple_pendulum(**kw)
    if demo == "double-pendulum":
        return ode.double_pendulum(**kw)
    return ode.bounce(**kw)


def demo_fit_config(free, defaults: dict, **fields):
    """The `FitConfig` of a table demo (RIGID_DEMOS, FEM_DEMOS) run with no fit flags: its fit `defaults`
    (FitConfig fields by name), the RGBA loss on every frame, and any other `fields` (progress, report, ...).
    The benchmarks fit with exactly this, so a setting added to a demo's defaults reaches them too.

    Args:
        free: the estimated quantities.
        defaults: the demo's fit settings (`DemoEntry.defaults`).
        **fields: other `FitConfig` fields, over the defaults.

    Returns:
        the `FitConfig`.
    """
    from gradsim_jax.sysid import FitConfig

    return FitConfig(free=tuple(free), loss="rgba", frame_stride=1, **{**defaults, **fields})


def demo_experiment(free, *, size, frames, cells=None, push=True):
    """The cloth demo scene for the estimated quantities `free` (canonical names).

    Args:
        free: the estimated quantities (among DEMO_ESTIMATES; velocity and friction each have their own scene).
        size: the image size in pixels.
        frames: the frames to simulate.
        cells: the cloth's cells along a side (None: the scene's own).
        push: whether the known push acts (False: none; the hanging cloth only).

    Returns:
        the demo's `Experiment`.
    """
    from gradsim_jax.scenes import demos

    kw = {"size": size, "frames": frames}
    if cells is not None:
        kw["cells"] = cells
    if "velocity" in free:
        if "friction" in free:
            raise ValueError("velocity and friction come from different demo scenes; estimate them separately")
        return demos.tossed_cloth(**kw)
    if "friction" in free:
        return demos.sliding_cloth(**kw)
    if "drag" in free or "lift" in free:
        kw.update(drag=0.5, lift=0.5)
    if "bending" in free:
        kw["bend_ke"] = 0.05
    if not push:
        kw["push"] = 0.0
    return demos.hanging_cloth(**kw)


def _scene_kwargs(demo: str, free, allowed, *, size, frames) -> dict:
    """Keyword arguments of a demo scene builder (size, and frames when given); ValueError when `free` names a
    quantity the demo's scene does not estimate (`allowed`; None: any)."""
    unknown = [n for n in free if allowed is not None and n not in allowed]
    if unknown:
        raise ValueError(f"demo {demo} estimates {', '.join(allowed)}; not {', '.join(unknown)}")
    return {"size": size} if frames is None else {"size": size, "frames": frames}


def rigid_demo_experiment(demo: str, free, *, size, frames=None):
    """The scene of the rigid demo `demo` estimating `free`.

    Args:
        demo: a name of RIGID_DEMOS ("rigid-mass", "rigid-material", "rigid-restitution").
        free: the estimated quantities (canonical names; "rigid-material": among RIGID_MATERIAL_ESTIMATES).
        size: the image size in pixels.
        frames: the frames to simulate (None: the scene's own).

    Returns:
        the demo's `Experiment`.
    """
    from gradsim_jax.scenes import rigid

    if demo == "rigid-mass":
        return rigid.rigid_mass(**_scene_kwargs(demo, free, None, size=size, frames=frames))
    if demo == "rigid-restitution":
        return rigid.rigid_restitution(**_scene_kwargs(demo, free, None, size=size, frames=frames))
    kw = _scene_kwargs(demo, free, RIGID_MATERIAL_ESTIMATES, size=size, frames=frames)
    return rigid.rigid_material(estimate=free, **kw)


def contact_demo_experiment(demo: str, free, *, size, frames=None):
    """The scene of the contact demo `demo` estimating `free`.

    Args:
        demo: a name of CONTACT_DEMOS ("stack", "drape", "lift").
        free: the estimated quantities (canonical names, among the scene's own).
        size: the image size in pixels.
        frames: the frames to simulate (None: the scene's own).

    Returns:
        the demo's `Experiment`.
    """
    from gradsim_jax.scenes import contact

    build, allowed = {"stack": (contact.stack, contact.STACK_QUANTITIES),
                      "drape": (contact.drape, contact.DRAPE_QUANTITIES),
                      "lift": (contact.lift, contact.LIFT_QUANTITIES)}[demo]
    return build(estimate=free, **_scene_kwargs(demo, free, allowed, size=size, frames=frames))


def fem_demo_experiment(demo: str, free, *, size, frames=None):
    """The scene of the FEM demo `demo` estimating `free`.

    Args:
        demo: a name of FEM_DEMOS ("fem-material", "fem-mass").
        free: the estimated quantities (canonical names; "fem-material": among FEM_MATERIAL_ESTIMATES).
        size: the image size in pixels.
        frames: the frames to simulate (None: the scene's own).

    Returns:
        the demo's `Experiment`.
    """
    from gradsim_jax.scenes import fem

    if demo == "fem-mass":
        return fem.fem_mass(**_scene_kwargs(demo, free, None, size=size, frames=frames))
    kw = _scene_kwargs(demo, free, FEM_MATERIAL_ESTIMATES, size=size, frames=frames)
    return fem.fem_material(estimate=free, **kw)
