"""gs.jit: jax.jit with gradsim-jax's XLA options (`gradsim_jax.compilation`)."""

import os

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np

import gradsim_jax as gs
import pytest

from gradsim_jax.compilation import COMPILER_OPTIONS, DEFAULT_OPTIONS, OPTIONS_VARIABLE, jit, options_from_environment


def _hanging_cloth_loss():
    topology, params, state0 = gs.cloth_grid(2, 2, 0.1, 0.1, fix_top=True, tri_ke=1e3, tri_ka=1e3,
                                             tri_kd=1.0).build()

    def loss(v0):
        traj = gs.simulate(topology, params, gs.particle_state(state0.particles.x, v0), frames=2, substeps=4)
        return jnp.mean(jnp.sum(traj.particles.x[-1] ** 2, axis=-1))

    return loss, state0.particles.v + 0.1


def test_jit_agrees_with_plain_jit_on_a_rollout_and_its_gradient():
    loss, v0 = _hanging_cloth_loss()
    ours = jit(jax.value_and_grad(loss))(v0)
    plain = jax.jit(jax.value_and_grad(loss))(v0)
    np.testing.assert_allclose(ours[0], plain[0], rtol=1e-5)
    np.testing.assert_allclose(ours[1], plain[1], rtol=1e-4, atol=1e-7)
    assert gs.jit is jit


def test_jit_compiles_with_the_options_and_merges_the_callers():
    # XLA refuses an unknown or malformed option when compiling, so compiling proves the options are valid.
    compiled = jit(lambda x: jnp.sum(x * x, axis=0)).lower(jnp.ones((3, 5))).compile()
    np.testing.assert_allclose(compiled(jnp.ones((3, 5))), np.full(5, 3.0))
    assert DEFAULT_OPTIONS == {"xla_cpu_experimental_ynn_fusion_type": ""}
    assert COMPILER_OPTIONS == {**DEFAULT_OPTIONS, **options_from_environment(os.environ.get(OPTIONS_VARIABLE))}
    merged = jit(lambda x: x + 1, compiler_options={"xla_cpu_enable_fast_math": False}, static_argnums=())
    assert float(merged(jnp.float32(1.0))) == 2.0


def test_options_from_the_environment_are_checked():
    assert options_from_environment(None) == {} and options_from_environment("") == {}
    assert options_from_environment('{"xla_cpu_use_fusion_emitters": false}') == {
        "xla_cpu_use_fusion_emitters": False}
    for bad in ("xla_cpu_use_fusion_emitters=false", "[1, 2]", '{"a": [1]}'):
        with pytest.raises(ValueError, match="GRADSIM_JAX_COMPILER_OPTIONS"):
            options_from_environment(bad)


HIGHEST = (jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST)


def _dot_precisions(fn, *args) -> set:
    """The precision of every dot_general in fn's jaxpr (nested jaxprs included)."""
    found = set()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "dot_general":
                found.add(eqn.params["precision"])
            for sub in jax.extend.core.jaxprs_in_params(eqn.params):
                walk(sub)

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return found


def test_products_are_traced_at_highest_precision_unless_the_caller_chose():
    from gradsim_jax.compilation import MATMUL_PRECISION, accurate

    a = jnp.ones((3, 3))
    product = accurate(lambda x: x @ x)
    assert MATMUL_PRECISION == "highest"
    assert _dot_precisions(product, a) == {HIGHEST}
    # Under the caller's own jit and grad too: the precision is read when the product is traced.
    assert _dot_precisions(jax.jit(jax.grad(lambda x: jnp.sum(product(x)))), a) == {HIGHEST}
    compiled = jit(lambda x: x @ x).lower(a).compiler_ir("hlo").as_hlo_text()
    assert "operand_precision={highest,highest}" in compiled
    # A caller's choice is kept.
    with jax.default_matmul_precision("bfloat16"):
        assert _dot_precisions(product, a) == {(jax.lax.Precision.DEFAULT, jax.lax.Precision.DEFAULT)}
    assert _dot_precisions(lambda x: x @ x, a) == {None}


def test_the_public_entry_points_trace_their_products_at_highest_precision():
    # A rigid box's rollout (rotations: 3 x 3 products) and a render (the camera's 4 x 4 projection).
    from gradsim_jax.geometry.primitives import box_mesh

    top, par, st = gs.rigid_body(*box_mesh(0.1, 0.1, 0.1), mass=1.0, pos=(0.0, 1.0, 0.0), omega=(1.0, 2.0, 0.5)).build()
    rollout = lambda p: gs.simulate(top, p, st, frames=1, substeps=2).rigid.q[-1]  # noqa: E731
    found = _dot_precisions(rollout, par)
    assert found and found <= {HIGHEST}, found
    cam = gs.look_at_camera(2.0, 20.0, 30.0, width=16, height=16)
    verts = jnp.asarray([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.5, 0.0]])
    faces = jnp.asarray([[0, 1, 2]])
    found = _dot_precisions(lambda v: gs.render(cam, v, faces), verts)
    assert found and found <= {HIGHEST}, found


def test_the_precision_changes_nothing_on_a_cpu():
    # XLA's CPU multiplies float32 at full precision whatever the setting: bit-identical results.
    loss, v0 = _hanging_cloth_loss()
    ours = jax.jit(jax.value_and_grad(loss))(v0)
    with jax.default_matmul_precision("bfloat16"):
        theirs = jax.jit(jax.value_and_grad(loss))(v0)
    if jax.default_backend() == "cpu":
        np.testing.assert_array_equal(ours[0], theirs[0])
        np.testing.assert_array_equal(ours[1], theirs[1])


def test_float64_goes_to_the_host_where_the_backend_lacks_it(monkeypatch):
    import warnings

    from gradsim_jax import compilation
    from gradsim_jax.diagnostics.precision import at_precision

    assert compilation.native_float64("cpu") and compilation.native_float64("gpu")
    assert not compilation.native_float64("tpu")
    if compilation.native_float64():  # a CPU: nothing moves, nothing said
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with at_precision(64) as dtype:
                assert jnp.ones(2).dtype == dtype == jnp.float64
    monkeypatch.setattr(compilation, "native_float64", lambda backend=None: False)
    monkeypatch.setattr(compilation, "_WARNED_HOST", [])
    with pytest.warns(compilation.Float64OnHost, match="float64 side of a precision check runs on the host CPU"):
        with at_precision(64):
            x = jnp.fft.fft(jnp.ones(4))  # what a TPU cannot do in float64
            assert x.dtype == jnp.complex128 and x.devices() == {jax.devices("cpu")[0]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        with at_precision(64):
            pass


def test_choices_per_backend_follow_the_default_device(monkeypatch):
    """On an accelerator's machine, work placed on its host CPU (`jax.default_device`) gets the CPU's choices:
    gathers instead of stencils and one-hot rows, the CPU's unrolling, native float64."""
    from gradsim_jax import compilation
    from gradsim_jax.physics import stencil
    from gradsim_jax.physics.rollout import DEFAULT_UNROLL, default_unroll
    from gradsim_jax.render import RenderSettings, rasterize

    assert compilation.current_backend() == jax.default_backend()
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")  # as on a TPU machine
    grid = stencil.ClothGrid(jnp.zeros(0, jnp.int32), jnp.zeros(0, jnp.int32), rows=3, cols=3)
    assert compilation.current_backend() == "tpu" and not compilation.native_float64()
    assert stencil.stencil_active(grid) and stencil.lattice_planes(grid)
    assert rasterize.one_hot_rows(RenderSettings())
    with jax.default_device(jax.devices("cpu")[0]):
        assert compilation.current_backend() == "cpu" and compilation.native_float64()
        assert not stencil.stencil_active(grid) and not stencil.lattice_planes(grid)
        assert not rasterize.one_hot_rows(RenderSettings())
        assert default_unroll() == DEFAULT_UNROLL["cpu"]
    with jax.default_device("cpu"):  # a platform's name
        assert compilation.current_backend() == "cpu"


def test_an_option_that_computes_gradients_wrong_is_warned_about():
    import warnings

    from gradsim_jax import compilation

    with pytest.warns(compilation.WrongGradientOption, match="xla_cpu_use_fusion_emitters = False.*unset it"):
        compilation.warn_wrong_gradient_options({"xla_cpu_use_fusion_emitters": False})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compilation.warn_wrong_gradient_options({"xla_cpu_use_fusion_emitters": True, "xla_cpu_enable_fast_math": False})
    assert "xla_cpu_use_fusion_emitters" not in compilation.COMPILER_OPTIONS  # the suite runs the library's own
