"""The ODE body's section of report.json ("energy", `sysid.outputs.sections`): its energy over the fitted motion
and its solver's drift, the way gradSim checks its double pendulum (`energy_report`)."""

from __future__ import annotations

from typing import Optional

import jax

from gradsim_jax.physics.ode import EDRIFT, energy_drift, ode_trajectory
from gradsim_jax.sysid.experiment import Experiment, as_theta, compiled, rollout


def has_energy(exp: Experiment) -> bool:
    """Whether the experiment has an ODE body whose system has an energy (`OdeSystem.energy`).

    Args:
        exp: the experiment.

    Returns:
        A Python bool.
    """
    return exp.topology.ode is not None and exp.topology.ode.system.energy is not None


def _ode_motions(exp: Experiment, theta: dict):
    """(ODE params, world, its motion [frames + 1], the conservative twin's params and motion, or None twice)."""
    params, traj = rollout(exp, theta)
    twin = exp.topology.ode.system.conservative(params.ode)
    if twin is None:
        return params.ode, params.world, traj.ode, None, None
    y0 = jax.tree.map(lambda a: a[0], traj.ode)
    return (params.ode, params.world, traj.ode, twin,
            ode_trajectory(exp.topology.ode, twin, params.world, y0, exp.frames, exp.frame_dt, exp.substeps))


def energy_report(exp: Experiment, theta: dict) -> Optional[dict]:
    """The energy of an ODE body's motion at `theta`, the way gradSim checks its double pendulum: per body the
    initial and final energy and max_t |E(t) - E(0)| of the fitted motion (joint damping, lost restitution and
    friction included: it falls by design), and the same of its conservative twin (`OdeSystem.conservative`:
    the same start with no dissipation), whose drift is the solver's alone, with gradSim's limit `EDRIFT`
    (0.05 J). None when the scene has no ODE body or its system has no energy.

    Args:
        exp: the experiment.
        theta: {quantity name: value}, missing entries from the experiment's defaults.

    Returns:
        {"unit" (the system's `energy_unit`), "initial", "final", "max_drift", "relative": per body, and for a system with a conservative
        twin "conservative_max_drift", "conservative_relative", "edrift", "within_edrift"}, or None.
    """
    if not has_energy(exp):
        return None
    ode_params, world, motion, twin, twin_motion = compiled(exp, _ode_motions, "energy_report")(as_theta(exp, theta))
    system = exp.topology.ode.system
    out = energy_drift(system, ode_params, world, motion)
    if twin is not None:
        conservative = energy_drift(system, twin, world, twin_motion)
        out.update({"conservative_max_drift": conservative["max_drift"],
                    "conservative_relative": conservative["relative"], "edrift": EDRIFT,
                    "within_edrift": bool(max(conservative["max_drift"]) <= EDRIFT)})
    return out
