"""Write the tutorial pages (docs/tutorials/NAME.md) and their pictures (docs/assets/demos/NAME/) from runs of
the demos: each page says what the demo shows, the command, its comparison video and loss curve, and the
numbers of that run beside gradSim's.

    for d in cloth cloth-control ...; do gradsim-jax demo $d --out runs/demos/$d; done
    python tools/demo_pages.py runs/demos        # every demo with a report.json under runs/demos/NAME
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

#: name -> (title, what it shows, gradSim's figure, the notes page)
DEMOS = {
    "cloth": (
        "Cloth: mass, stiffness and damping",
        "A 48 px video of a small cloth pinned along one edge swinging down, its free edge pushed by a known "
        "force during the first frames (the push separates mass from stiffness and damping: under gravity and "
        "internal forces alone only their ratios show). The fit starts 30-50 % off and recovers all three "
        "jointly: Adam through `gs.fit`, then Levenberg-Marquardt steps on the pixel residuals. `--estimate` "
        "takes velocity (gradSim's cloth demo: every particle's initial velocity), friction, bending, drag, "
        "lift and any mix.",
        "gradSim reports no error for the cloth's material. For every particle's initial velocity "
        "(`--estimate velocity`) its Table 3 gives a mean relative error of 0.026; ours is 1.5e-5 to 1.9e-5 (seeds "
        "0-2, two CPUs: `benchmarks/bench_spread.py`).",
        "cloth"),
    "cloth-control": (
        "Cloth: the initial velocity that lands it on a target",
        "gradSim's control_cloth: one initial velocity (a 3-vector) of a cloth is optimized so that the last "
        "rendered frame matches a target image rendered with a hidden velocity.",
        "gradSim reports the experiment without an error figure.",
        "cloth"),
    "rigid-mass": (
        "Rigid body: mass of a box of known shape",
        "A box resting on the ground is pushed by a known force during the first frames, sliding and spinning; "
        "the push acts as F / m, which is what makes the mass visible. gradSim's demo_mass_known_shape.",
        "gradSim, Table 1: relative error 9.0e-5.",
        "rigid-bodies"),
    "rigid-material": (
        "Rigid body: ground contact coefficients",
        "A box starting level on the ground with a horizontal velocity and spin is pulled back by a known "
        "force: it slides against Coulomb friction (mu), stops and creeps back in the viscous regime (kf). "
        "Each coefficient alone (the others known, as in gradSim's Table 2) is recovered from 50 % off; the "
        "default estimate is the contact stiffness body_ke (then the scene is the first bounce of a level "
        "drop).",
        "gradSim, Table 2: ke 3e-3, kf 1e-3, mu 7e-3.",
        "rigid-bodies"),
    "rigid-restitution": (
        "Rigid body: coefficient of restitution",
        "A level cube spinning about the vertical drops onto the ground and bounces several times (impulse "
        "contact model); each bounce's apex is e^2 times the last.",
        "gradSim reports no figure for restitution.",
        "rigid-bodies"),
    "stack": (
        "Contact between bodies: a box's mass and the friction between two boxes",
        "Two boxes of one mass and material: the upper one rests on the lower one, which stands on the ground, "
        "and is pushed along its top by two known forces, a strong one and later a weak one back; it slides "
        "and stops against the friction between the boxes (penalty contact between rigid bodies, "
        "`physics.bodycontact`). The pushes act as F / m, the friction as mu g; two pushes of different "
        "strength separate them (with one, a heavier box on slicker boxes slid almost alike). Mass and "
        "friction are fitted jointly from 50 % off.",
        "gradSim has no contact between bodies.",
        "rigid-bodies"),
    "drape": (
        "Contact with a collider: a cloth's bending stiffness and its friction on a sphere",
        "A 0.8 m square cloth (8 x 8 cells) is released level 5 cm above a sphere lying on the floor, 20 cm "
        "off-centre: it lands, folds over the sphere, slides down it and settles over it and the floor "
        "(cloth against a static sphere collider, `physics.colliders`, penalty contact with Coulomb "
        "friction). How it folds shows the bending stiffness, how far it slides the friction on the sphere; "
        "both are fitted jointly from 50 % off.",
        "gradSim has no colliders (its cloth meets only the ground).",
        "cloth"),
    "lift": (
        "A moving collider: a cloth's mass and stiffness as a rod lifts it",
        "A 0.6 m square cloth (8 x 8 cells) lies on the floor; a rod (a capsule collider moved by keyframes, "
        "`physics.collider_motion`) rises from under the floor below one corner, lifts it 25 cm and holds it "
        "there, while the opposite edge is pulled outwards by a known force during the first frames "
        "(the pull acts as F / m: without it only the ratio of stiffness to mass would show). Mass and "
        "stiffness are fitted jointly from 50 % off.",
        "gradSim has no moving obstacles.",
        "cloth"),
    "rigid-shape": (
        "Rigid body: shape from video",
        "gradSim's mass_unknown_shape: per-vertex offsets of a sphere's hull are fitted until it moves and "
        "looks like the cube of the video, with a smoothness prior on the offsets.",
        "gradSim shows the experiment qualitatively.",
        "rigid-bodies"),
    "fem-material": (
        "Soft body: Lame parameters and damping",
        "A 0.3 x 0.2 x 0.2 m box of 60 tets dropped level from 10 cm squashes to about 60 % of its height and "
        "wobbles; the squash and bulge show k_lambda and k_mu, the wobble's decay k_damp. All three are "
        "fitted jointly from 50 % off, in up to 5 rounds of Adam then Levenberg-Marquardt.",
        "gradSim, Table 3: mu 0.0054, lambda 0.0056.",
        "soft-bodies"),
    "fem-mass": (
        "Soft body: every particle's mass",
        "The same box thrown up in free fall, each particle pushed by its own known force during the first "
        "frames: first a density field across the body, then every particle's mass on its own (gradSim's "
        "demo_fem).",
        "gradSim, Table 3: mean relative error 0.048.",
        "soft-bodies"),
    "control-cloth": (
        "Control: throw a cloth onto a spot",
        "A policy of corner forces (tanh of phase sinusoids) is trained by gradient descent through simulation "
        "and rendering so that the cloth lands where a target image shows it; random policies are the baseline.",
        "gradSim's control_cloth fits one initial velocity instead of a policy.",
        "control"),
    "control-fem": (
        "Control: a soft gear crawls to a pose",
        "A policy of tet activations makes a gear-shaped soft body crawl to the pose a target image shows "
        "(gradSim's control_fem).",
        "gradSim reports 0.107 (trained) against 3.50 (random) as a mean squared coordinate error.",
        "control"),
    "control-walker": (
        "Control: a soft four-legged walker",
        "A gait: a policy of tet activations makes a four-legged soft walker walk to the pose a target image "
        "shows (gradSim's control_walker).",
        "gradSim shows the experiment qualitatively.",
        "control"),
    "control-jellyfish": (
        "Control: a cloth jellyfish swims up",
        "A swimming stroke: a policy of bending rest angles makes a cloth jellyfish swim up to the height a "
        "target image shows, against quadratic drag (gradSim's control_jellyfish).",
        "gradSim shows the experiment qualitatively.",
        "control"),
    "pendulum": (
        "A pendulum's length and damping",
        "gradSim's demo_pendulum: a 1 m pendulum with a 1 kg bob and a joint damping of 0.05 N m s/rad, released "
        "from 0.8 rad and filmed for 2 s at 30 fps. Its motion is an ODE in its angle, solved by Diffrax "
        "(an [ODE body](../concepts/ode-bodies.md)); the fit starts 50 % off both.",
        "gradSim reports no error for this experiment.",
        "ode-bodies"),
    "double-pendulum": (
        "A chaotic double pendulum's arm lengths",
        "gradSim's demo_double_pendulum: l1 = l2 = 1 m, m1 = m2 = 1 kg, g = 10 m/s^2, released at rest from "
        "(3 pi / 7, 3 pi / 4), 50 frames at 30 fps, filmed from 8 m; both lengths are fitted from l2 = 1.7.",
        "gradSim reports no error for this experiment (and that the adjoint method failed on it: ours is "
        "measured in [ODE bodies](../concepts/ode-bodies.md#solvers-and-adjoints)).",
        "ode-bodies"),
    "bounce": (
        "A bouncing ball's launch speed and gravity",
        "gradSim's demo_bounce2d: a ball of radius 0.75 m released 5 m up at 1 m/s along x under g = -9 "
        "m/s^2, bouncing twice (restitution 0.8) in 100 frames at 30 fps, each impact's time solved exactly "
        "inside the step. The launch speed and gravity are fitted from 3 m/s and -10 m/s^2 "
        "(`--estimate ball_speed,gravity,ball_restitution` fits the restitution too).",
        "gradSim reports no error for this experiment.",
        "ode-bodies"),
    "smoke-buoyancy": (
        "A smoke plume's buoyancy and inflow rate",
        "A plume rising in a closed 1 m box of 48 x 48 cells from an inflow disc near the floor, filmed for 45 "
        "frames at 30 fps as a 64 px video (density through a colour map). Its buoyancy (1 m/s^2 per unit "
        "density) and inflow rate (2 per s) are fitted from 50 % off through the smoke solver (pressure by "
        "conjugate gradients, adjoint by a second solve) and the density renderer: Adam, then "
        "Levenberg-Marquardt.",
        "gradSim fits no smoke parameters (its smoke experiment is control: see demo smoke-shape).",
        "concepts/smoke"),
    "smoke-shape": (
        "Smoke that forms a picture",
        "gradSim's demo_smoke2d: a closed box of 110 x 110 cells with smoke filling its lower third, 100 steps. "
        "The initial velocity field (every face of the grid) is optimized by Adam until the smoke at the last "
        "step forms a letter drawn in code (`--text`) or a picture of your own (`--target IMAGE`).",
        "gradSim shows its smoke2d result as pictures, without a number.",
        "concepts/smoke"),
    "texture": (
        "A mesh's texture from 8 views",
        "gradSim's softras_texture_optimization, the renderer alone: a bulging sphere made in code, its 64 x 64 "
        "texture (hue, bands and a checker) rendered from 8 cameras at 96 px; the texture is recovered from grey "
        "by Adam through the soft rasterizer and scored by PSNR over the mesh's pixels, on the 8 views and on 4 "
        "views held out of the fit. The videos show the 8 views, then the 4 held out.",
        "gradSim shows its texture result as pictures, without a number.",
        "concepts/rendering"),
    "shape": (
        "A mesh's shape from 12 silhouettes",
        "gradSim's softras_vertex_optimization, the renderer alone: a superquadric made in code (a rounded box of "
        "semi-axes 1, 0.7 and 0.8 m) seen from 12 cameras at 64 px; an icosphere of 1280 triangles is deformed by "
        "Adam through the soft rasterizer until its silhouettes match (soft IoU loss, Laplacian and edge-length "
        "regularization), and scored by the silhouette IoU on the 12 views and on 4 views held out of the fit, and "
        "by the chamfer distance to the true surface. The videos show the 12 views, then the 4 held out; "
        "`--rasterizer dibr` runs it with DIB-R.",
        "gradSim shows its vertex-optimization result as pictures, without a number.",
        "concepts/rendering"),
}


def _frame(video: Path, out: Path) -> None:
    """The middle frame of a comparison video as a PNG."""
    import imageio.v2 as imageio

    frames = imageio.mimread(video, memtest=False)
    imageio.imwrite(out, np.asarray(frames[len(frames) // 2]))


def _fmt(x) -> str:
    return f"{x:.6g}" if isinstance(x, (int, float)) else str(np.round(np.asarray(x, float), 4).tolist())


def _results(name: str, r: dict) -> str:
    """The run's numbers as a table."""
    wall = r.get("total_wall_time_s", r.get("wall_time_s", 0.0))
    if "psnr_db" in r:
        p = r["psnr_db"]
        return (f"| PSNR over the mesh's pixels (dB) | initial (grey) | fitted |\n|---|---:|---:|\n"
                f"| the {r['views']} fitted views | {p['fitted_views']['initial']:.1f} | "
                f"{p['fitted_views']['fitted']:.1f} |\n| the {r['held_out_views']} held-out views | "
                f"{p['held_out_views']['initial']:.1f} | {p['held_out_views']['fitted']:.1f} |\n\n"
                f"Texture RMSE against the truth {r['texture_rmse']:.3g} (texels no view sees stay grey); "
                f"{r['iterations']['adam']} Adam iterations, {wall:.0f} s in all.")
    if "chamfer_m" in r:
        iou, ch = r["silhouette_iou"], r["chamfer_m"]
        return (f"| | IoU, {r['views']} fitted views | IoU, {r['held_out_views']} held-out views | "
                f"chamfer distance (m) |\n|---|---:|---:|---:|\n"
                + "".join(f"| {k} | {iou['fitted_views'][k]:.4f} | {iou['held_out_views'][k]:.4f} | "
                          f"{ch[k]['mean']:.4f} |\n" for k in ("initial", "fitted"))
                + f"\nLowest held-out view's IoU {r['lowest_view_iou']['held_out_views']:.4f}; the shape is "
                f"{r['target_size_m']:.1f} m across; {r['rasterizer']} rasterizer; {r['iterations']['adam']} Adam "
                f"iterations, {wall:.0f} s in all.")
    if "silhouette_iou" in r:
        iou = r["silhouette_iou"]
        return (f"| | image loss (last frame) | overlap (IoU) with the picture |\n|---|---:|---:|\n"
                f"| initial (at rest) | {r['initial_loss']:.3g} | {iou['initial']:.3f} |\n"
                f"| fitted | {r['final_loss']:.3g} | {iou['fitted']:.3f} |\n\n"
                f"{r['iterations']['adam']} Adam iterations, {wall:.0f} s in all.")
    if "quantities" in r:
        rows = ["| quantity | true | start | estimate | relative error |", "|---|---:|---:|---:|---:|"]
        for q, row in r["quantities"].items():
            rows.append(f"| {q} | {_fmt(row.get('true', '-'))} | {_fmt(row['initial'])} | {_fmt(row['estimated'])} "
                        f"| {row.get('relative_error', float('nan')):.2g} |")
        rows.append("")
        rows.append(f"Final loss {r['final_loss']:.3g}; {r['iterations']['adam']} Adam iterations and "
                    f"{r['iterations']['levenberg_marquardt']} Levenberg-Marquardt steps; {wall:.0f} s in all.")
        return "\n".join(rows)
    if "shape_metrics" in r:
        m = r["shape_metrics"]
        rows = ["| | silhouette IoU | mean vertex distance (m) | largest (m) | volume ratio |", "|---|---:|---:|---:|---:|"]
        for k in ("initial", "fitted"):
            rows.append(f"| {k} | {m[k]['silhouette_iou']:.4f} | {m[k]['mean_vertex_distance_m']:.4f} | "
                        f"{m[k]['max_vertex_distance_m']:.4f} | {m[k]['volume_ratio']:.3f} |")
        rows.append("")
        rows.append(f"The target is a box of half extents {r['target_shape']['box_half_extents_m']} m, the start a "
                    f"sphere of radius {r['template']['sphere_radius_m']} m; {r['iterations']['adam']} Adam "
                    f"iterations, {r.get('total_wall_time_s', r['wall_time_s']):.0f} s in all.")
        return "\n".join(rows)
    if "relative_error" in r:
        rows = ["| quantity | true | start | estimate | relative error |", "|---|---:|---:|---:|---:|"]
        for q, err in r["relative_error"].items():
            mean = f"mean {np.mean(err):.2g}" if np.ndim(err) else f"{err:.2g}"
            true, start, est = (r[k].get(q) for k in ("true", "initial", "estimated"))
            if np.ndim(true) and np.size(true) <= 4:  # a pendulum's lengths: the values themselves
                true, start, est = (", ".join(_fmt(float(x)) for x in np.ravel(v)) for v in (true, start, est))
            elif np.ndim(true):
                true, start, est = (f"{np.size(true)} values" for _ in range(3))
            else:
                true, start, est = _fmt(true), _fmt(start), _fmt(est)
            rows.append(f"| {q} | {true} | {start} | {est} | {mean} |")
        conv = r.get("convergence") or {}
        rows.append("")
        rows.append(f"Converged: {'yes' if conv.get('converged') else 'no'}; final loss {r['final_loss']:.3g}; "
                    f"{r['iterations']['adam']} Adam iterations and {r['iterations']['levenberg_marquardt']} "
                    f"Levenberg-Marquardt steps; {r.get('total_wall_time_s', r['wall_time_s']):.0f} s in all.")
        return "\n".join(rows)
    if "velocity_relative_error" in r:
        e = r["final_position_error"]
        return (f"| true velocity (m/s) | estimated | relative error | final position error |\n|---|---|---:|---:|\n"
                f"| {_fmt(r['true_velocity'])} | {_fmt(r['estimated_velocity'])} | "
                f"{r['velocity_relative_error']:.2g} | {e['center_error_m'] * 1000:.3g} mm over a "
                f"{e['travel_m']:.2f} m throw |\n\n{r['iterations']} Adam iterations, "
                f"{r.get('total_wall_time_s', r['wall_time_s']):.0f} s in all.")
    if "trained_final_error_m" in r:
        b = r["random_baseline"]
        return (f"| final centre-of-mass distance to the target | m |\n|---|---:|\n"
                f"| trained policy | {r['trained_final_error_m']:.4f} |\n"
                f"| untrained (initial) policy | {r['untrained_final_error_m']:.4f} |\n"
                f"| {b['n']} random policies: mean / best | {b['mean_m']:.4f} / {b['best_m']:.4f} |\n\n"
                f"The trained policy ends {r['ratio_random_mean_over_trained']:.3g}x closer than the random mean; "
                f"{r['iterations']} Adam iterations, {r.get('total_wall_time_s', 0):.0f} s in all.")
    return "```json\n" + json.dumps({k: v for k, v in r.items() if not isinstance(v, (dict, list))}, indent=1) + "\n```"


def write_page(name: str, run: Path) -> None:
    title, shows, gradsim, notes = DEMOS[name]
    r = json.loads((run / "report.json").read_text())
    assets = DOCS / "assets" / "demos" / name
    assets.mkdir(parents=True, exist_ok=True)
    shutil.copy(run / "comparison.mp4", assets / "comparison.mp4")
    shutil.copy(run / "loss.png", assets / "loss.png")
    _frame(run / "comparison.mp4", assets / "frame.png")
    pictures = ""
    for extra, caption in (("texture.png", "the textures: true, initial, fitted"),
                           ("shape.png", "the held-out views: target, initial, fitted"),
                           ("frames.png", "frames of the initial, fitted and target runs")):
        if (run / extra).exists():
            shutil.copy(run / extra, assets / extra)
            pictures += f"\n![{caption}](../assets/demos/{name}/{extra})\n"
    labels = ("target | untrained | trained" if name.startswith("control-")
              else "target | initial guess | fitted")
    text = f"""# demo {name}: {title}

{shows}

```sh
gradsim-jax demo {name}     # then open runs/{name}/report.html
```

<figure markdown="span">
  <video src="../assets/demos/{name}/comparison.mp4" controls loop muted autoplay playsinline width="100%"
         poster="../assets/demos/{name}/frame.png"></video>
  <figcaption>{labels} (comparison.mp4 of the run below)</figcaption>
</figure>

![loss against iterations](../assets/demos/{name}/loss.png)
{pictures}
## Measured

One run of `gradsim-jax demo {name}` with its defaults on a 2-core Intel Xeon (jax
{r.get('versions', {}).get('jax', '?')}, CPU):

{_results(name, r)}

**gradSim:** {gradsim}

Every option: [`gradsim-jax demo {name} --help`](../cli.md#demo-{name}). More measurements, other scenes and
what was tried: [{'the concepts page' if notes.startswith('concepts/') else 'Results in depth'}](../{notes if '/' in notes else 'notes/' + notes}.md).
"""
    (DOCS / "tutorials" / f"{name}.md").write_text(text)
    print(f"wrote docs/tutorials/{name}.md")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", type=Path, help="folder with one run folder per demo (runs/demos/NAME)")
    args = p.parse_args()
    for name in DEMOS:
        if (args.runs / name / "report.json").exists():
            write_page(name, args.runs / name)
        else:
            print(f"no run of demo {name} under {args.runs}: its page is left as it is")
    return 0


if __name__ == "__main__":
    sys.exit(main())
