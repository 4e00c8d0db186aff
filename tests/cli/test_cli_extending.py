"""A body kind defined outside the package, end to end (issue 53's acceptance): examples/extending/spring_chain.py
adds a spring-mass chain in one module with one registry line (`scenefile.extensions.register_body_kind`), and
examples/extending/chain.toml loads it ([scene] plugins) and holds a [chain] section. `gradsim-jax render` films
it and `gradsim-jax fit` recovers its springs' stiffness from the film; the pieces (physics, drawing, quantity,
section, plugin loading) are checked one by one below."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.cli import main
from gradsim_jax.fit.windows import Windows
from gradsim_jax.physics.components import COMPONENTS
from gradsim_jax.render.camera import project_pixels
from gradsim_jax.render.drawings import DRAWINGS
from gradsim_jax.render.overlays import OVERLAYS, Overlay
from gradsim_jax.render.mesh import scene_faces, scene_vertices
from gradsim_jax.scenefile import SCHEMA, SceneFileError, help_text, load_scene
from gradsim_jax.scenefile.extensions import (BODY_SECTIONS, LOADED_PLUGINS, BodyKindParts, register_body_kind,
                                              unregister_body_kind)
from gradsim_jax.scenefile.sections import SECTION_TYPES
from gradsim_jax.sysid import QUANTITIES
from gradsim_jax.sysid.config import SysIdResult
from gradsim_jax.sysid.simulated import simulate_video
from gradsim_jax.sysid.experiment import trajectory
from gradsim_jax.sysid.outputs.report import build_report
from gradsim_jax.sysid.outputs.sections import REPORT_SECTIONS, ReportSection
from gradsim_jax.sysid.windows.kinds import WINDOW_REFUSALS, WindowRefusal
from gradsim_jax.sysid.windows.runs import check_windowed
from gradsim_jax.sysid.quantities import assemble, default_theta
from gradsim_jax.typing import get_path, named_leaves

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "extending"


@pytest.fixture
def chain_dir(tmp_path):
    """A copy of examples/extending (its plugin loaded from there); the kind removed from every layer after."""
    for name in ("chain.toml", "spring_chain.py"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    yield tmp_path
    unregister_body_kind("chain")
    LOADED_PLUGINS.pop((tmp_path / "spring_chain.py").resolve(), None)


def edited(scene: Path, old: str, new: str) -> Path:
    """`scene` with `old` replaced by `new` (which must be there)."""
    text = scene.read_text()
    assert old in text
    scene.write_text(text.replace(old, new))
    return scene


def test_render_then_fit_recovers_the_chain_stiffness(chain_dir):
    scene, target, out = chain_dir / "chain.toml", chain_dir / "target.gif", chain_dir / "fit"
    assert main(["render", str(scene), "--out", str(target)]) == 0
    assert main(["fit", str(scene), "--target", str(target), "--true", "--out", str(out), "--no-progress"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["free"] == ["chain_ke"]
    assert report["initial"] == pytest.approx({"chain_ke": 12.0})
    # Started 40 % off; the loss ends under the GIF's noise floor and the estimate within 1 % (as the cloth
    # example's test: a GIF target is quantized to 8 bits and a palette). Measured: 6e-5.
    assert report["relative_error"]["chain_ke"] < 0.01
    assert report["final_loss"] < 1e-3 * 1e-2  # the start's loss was about 1e-3


def test_the_plugin_registers_the_kind_in_every_layer(chain_dir):
    spec = load_scene(chain_dir / "chain.toml")
    assert "chain" in [k.name for k in COMPONENTS] and "chain" in DRAWINGS and "chain" in BODY_SECTIONS
    assert QUANTITIES["chain_ke"].field == "bodies.chain.ke"
    assert "chain_ke" in SCHEMA["initial"] and "chain_ke" in SCHEMA["material"]
    assert spec.extras["chain"].ke == 20.0 and type(spec.extras["chain"]).__name__ == "ChainSection"
    assert spec.sections.initial.chain_ke == 12.0
    assert "[chain]  (a registered body kind: a spring-mass chain" in help_text() and "chain_ke" in help_text()
    load_scene(chain_dir / "chain.toml")  # a second read imports the plugin no more
    assert list(LOADED_PLUGINS).count((chain_dir / "spring_chain.py").resolve()) == 1
    unregister_body_kind("chain")
    assert "chain" not in [k.name for k in COMPONENTS] and "chain" not in DRAWINGS and "chain_ke" not in QUANTITIES
    assert "chain_ke" not in SCHEMA["initial"] and "chain_ke" not in SCHEMA["material"]
    assert "chain_ke" not in [f for f in SECTION_TYPES["initial"].__dataclass_fields__]
    assert "[chain]" not in help_text()


def test_the_chain_simulates_keeping_its_centre_and_momentum(chain_dir):
    exp = load_scene(chain_dir / "chain.toml").experiment()
    traj = trajectory(exp, exp.theta).bodies["chain"]
    x, v = np.asarray(traj.x, np.float64), np.asarray(traj.v, np.float64)
    assert x.shape == (13, 3, 3)
    # Equal masses, no gravity, at rest: the centre stays and the momentum stays zero; stretched, the ends
    # move inwards symmetrically and the middle mass stays.
    np.testing.assert_allclose(x.mean(axis=1), np.broadcast_to(x[0].mean(axis=0), (13, 3)), atol=1e-5)
    np.testing.assert_allclose(v.sum(axis=1), 0.0, atol=1e-5)
    np.testing.assert_allclose(x[:, 1], np.broadcast_to(x[0, 1], (13, 3)), atol=1e-5)
    np.testing.assert_allclose(x[:, 0, 0], -x[:, 2, 0], atol=1e-5)
    assert x[-1, 2, 0] - x[-1, 0, 0] < x[0, 2, 0] - x[0, 0, 0] - 0.1


def test_the_chain_renders_where_its_masses_project(chain_dir):
    exp = load_scene(chain_dir / "chain.toml").experiment()
    faces = scene_faces(exp.topology)
    assert faces.shape == (3 * 12, 3) and faces.max() == 3 * 8 - 1
    vertices = np.asarray(scene_vertices(exp.topology, exp.params, exp.state0))
    assert vertices.shape == (24, 3)
    _, video = simulate_video(exp, exp.theta)
    frame = video[0, ..., :3]
    x = exp.state0.bodies["chain"].x
    uv, _ = project_pixels(exp.camera, x)
    for u, v in np.asarray(uv):  # each mass's cube covers the pixel its centre projects to
        assert frame[int(v), int(u)].max() > 0.2, (u, v)
    middle, _ = project_pixels(exp.camera, (x[:-1] + x[1:]) / 2)
    for u, v in np.asarray(middle):  # and the gaps between them show the background
        assert frame[int(v), int(u)].max() < 0.05, (u, v)


def test_the_chain_quantity_addresses_params_bodies(chain_dir):
    exp = load_scene(chain_dir / "chain.toml").experiment()
    theta = default_theta(exp.topology, exp.params, exp.state0)
    assert float(theta["chain_ke"]) == 20.0
    params, _ = assemble(exp, {"chain_ke": jnp.asarray(15.0)})
    np.testing.assert_array_equal(np.asarray(params.bodies["chain"].ke), [15.0, 15.0])
    np.testing.assert_array_equal(np.asarray(params.bodies["chain"].mass), [0.5, 0.5, 0.5])
    # The branch's leaves are named by the dotted paths get_path follows (checks and diagnostics name them so).
    names = [n for n, _ in named_leaves(params, "") if n.startswith("bodies")]
    assert names == ["bodies.chain.mass", "bodies.chain.ke", "bodies.chain.rest"]
    assert get_path(params, "bodies.chain.ke") is params.bodies["chain"].ke


def test_bad_plugins_and_sections_name_the_file_and_key(chain_dir):
    scene = chain_dir / "chain.toml"
    missing = edited(scene, '"spring_chain.py"', '"nowhere.py"')
    with pytest.raises(SceneFileError, match=r"chain.toml: \[scene\] plugins: file not found: .*nowhere.py"):
        load_scene(missing)
    (chain_dir / "broken.py").write_text("raise RuntimeError('no chain today')\n")
    broken = edited(scene, '"nowhere.py"', '"broken.py"')
    with pytest.raises(SceneFileError, match=r"\[scene\] plugins: .*broken.py raised RuntimeError: no chain today"):
        load_scene(broken)
    without = edited(scene, 'plugins = ["broken.py"]', "")
    with pytest.raises(SceneFileError, match=r"unknown section \[chain\]"):
        load_scene(without)
    edited(scene, "[scene]\n", '[scene]\nplugins = ["spring_chain.py"]\n')
    unknown_key = edited(scene, "[chain]\n", "[chain]\nlinks = 4\n")
    with pytest.raises(SceneFileError, match=r"\[chain\] unknown key 'links'"):
        load_scene(unknown_key)
    bad_value = edited(scene, "links = 4\nn = 3", "n = 1")
    with pytest.raises(SceneFileError, match=r"\[chain\] n must be at least 2"):
        load_scene(bad_value).experiment()
    not_finite = edited(scene, "mass = 0.5", "mass = nan")
    with pytest.raises(SceneFileError, match=r"\[chain\] mass must be finite"):
        load_scene(not_finite)


# ---------------------------------------------------------------------------------------------------------
# More hooks a kind defined outside the package may add, without editing the package: what it composites over
# the meshes (an overlay: here a red tint as strong as the chain is long), a section of report.json, and a
# refusal of windowed fits. Registered from this test module, the way a plugin registers them.


@dataclasses.dataclass(frozen=True)
class Tint:
    """How the chain's tint is filmed: red added per metre of the chain's length."""

    gain: float = 1.0


class ChainTint(Overlay):
    name = "chain"
    data_name = "length"
    field = "bodies.chain.x"

    def present(self, topology):
        return "chain" in (topology.bodies or {})

    def filmed(self, topology, trajectory):
        x = trajectory.bodies["chain"].x  # [T, m, 3]
        return x[:, -1, 0] - x[:, 0, 0]  # [T] m, from the first mass to the last

    def default_look(self):
        return Tint()

    def check_look(self, look):
        if not isinstance(look, Tint):
            raise TypeError(f"the chain's look must be a Tint, got {type(look).__name__}")

    def over(self, camera, topology, data, image, look):
        return image.at[..., 0].add(look.gain * data)


def chain_length_section(exp, theta):
    x = np.asarray(trajectory(exp, theta).bodies["chain"].x)
    return {"first_m": float(x[0, -1, 0] - x[0, 0, 0]), "last_m": float(x[-1, -1, 0] - x[-1, 0, 0])}


EXTRAS = dict(overlay=ChainTint(),
              report_sections=(ReportSection("chain_length", lambda exp: "chain" in (exp.topology.bodies or {}),
                                             chain_length_section),),
              window_refusal=WindowRefusal("chain", "Topology.bodies['chain']", "no start part reads a chain",
                                           "a chain's start is not read off the video"))


def test_a_kind_adds_an_overlay_a_report_section_and_a_window_refusal(chain_dir):
    scene = chain_dir / "chain.toml"
    plain = load_scene(scene).experiment()
    _, before = simulate_video(plain, plain.theta)
    kind = next(k for k in COMPONENTS if k.name == "chain")
    register_body_kind(BodyKindParts(kind=kind, drawing=DRAWINGS["chain"], quantities=(QUANTITIES["chain_ke"],),
                                     section=BODY_SECTIONS["chain"], **EXTRAS))
    assert OVERLAYS["chain"] is EXTRAS["overlay"] and "chain" in WINDOW_REFUSALS
    assert [s.name for s in REPORT_SECTIONS][:1] == ["energy"] and REPORT_SECTIONS[-1].name == "chain_length"
    exp = load_scene(scene).experiment()
    assert exp.looks == {"chain": Tint()} and plain.looks == {}  # the overlay's default look
    # The overlay composites over the meshes: red grows by the chain's length, the rest as without it.
    _, after = simulate_video(exp, exp.theta)
    x = np.asarray(trajectory(exp, exp.theta).bodies["chain"].x)
    length = x[:, -1, 0] - x[:, 0, 0]
    np.testing.assert_allclose(after[..., 0] - before[..., 0], np.broadcast_to(length[:, None, None],
                                                                                before.shape[:3]), atol=1e-5)
    np.testing.assert_array_equal(after[..., 1:], before[..., 1:])
    _, twice = simulate_video(dataclasses.replace(exp, looks={"chain": Tint(2.0)}), exp.theta)
    np.testing.assert_allclose(twice[..., 0] - before[..., 0], 2 * (after[..., 0] - before[..., 0]), atol=1e-5)
    with pytest.raises(TypeError, match="must be a Tint"):
        dataclasses.replace(exp, looks={"chain": "red"})
    # Its report section, after the built-in ones (the ODE energy: None, no ODE body here).
    result = SysIdResult(theta=dict(exp.theta), history={}, report=None, wall_time=0.0, adam_iterations=0,
                         lm_iterations=0, loss=0.0)
    report = build_report(exp, ["chain_ke"], None, dict(exp.theta), result)
    keys = list(report)
    assert report["energy"] is None and keys.index("energy") < keys.index("chain_length") < keys.index("inputs")
    assert report["chain_length"] == pytest.approx({"first_m": length[0], "last_m": length[-1]})
    # Its refusal of windowed fits.
    with pytest.raises(ValueError, match=r"not available for chain \(Topology.bodies\['chain'\]\): no start part"):
        check_windowed(exp, Windows(exp.frames, 6), "multiple")
    unregister_body_kind("chain")
    assert "chain" not in OVERLAYS and "chain" not in WINDOW_REFUSALS
    assert "chain_length" not in [s.name for s in REPORT_SECTIONS]
