"""Loss landscapes: values and gradients on a grid, chunked evaluation, plots."""

import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.diagnostics.landscape import loss_landscape, relative_grid


def bowl(p):
    """(a - 2)^2 + 3 (b - 1)^2 + a b: known value and gradient everywhere."""
    return (p["a"] - 2.0) ** 2 + 3.0 * (p["b"] - 1.0) ** 2 + p["a"] * p["b"]


def test_two_dimensional_grid_matches_the_closed_form_in_chunks(tmp_path):
    params = {"a": jnp.asarray(2.0), "b": jnp.asarray(1.0), "fixed": jnp.ones(3)}
    grid = {n: float(params[n]) * (1 + relative_grid(0.5, 5)) for n in ("a", "b")}
    result = loss_landscape(bowl, params, grid, batch_size=3, truth={"a": 2.0, "b": 1.0})  # 25 points, chunks of 3
    a, b = np.meshgrid(grid["a"], grid["b"], indexing="ij")
    np.testing.assert_allclose(result.loss, (a - 2) ** 2 + 3 * (b - 1) ** 2 + a * b, rtol=1e-6)
    np.testing.assert_allclose(result.grad[..., 0], 2 * (a - 2) + b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result.grad[..., 1], 6 * (b - 1) + a, rtol=1e-5, atol=1e-6)
    whole = loss_landscape(bowl, params, grid, batch_size=25)
    np.testing.assert_allclose(whole.loss, result.loss, rtol=1e-7)
    assert result.minimum()["loss"] == pytest.approx(result.loss.min())
    result.plot(tmp_path / "l2.png")
    result.write_json(tmp_path / "l2.json")
    assert (tmp_path / "l2.png").stat().st_size > 1000


def test_one_dimensional_grid_and_plot(tmp_path):
    result = loss_landscape(bowl, {"a": jnp.asarray(2.0), "b": jnp.asarray(1.0)}, {"b": np.linspace(0.5, 1.5, 4)})
    np.testing.assert_allclose(result.grad[:, 0], 6 * (np.linspace(0.5, 1.5, 4) - 1) + 2, rtol=1e-5)
    result.plot(tmp_path / "l1.png")
    assert (tmp_path / "l1.png").stat().st_size > 1000 and result.loss.shape == (4,)


@pytest.mark.parametrize("vary, match", [
    ({"c": [1.0, 2.0]}, "unknown field"),
    ({"v": [1.0, 2.0]}, "not a scalar"),
    ({"a": [1.0]}, "at least 2"),
    ({"a": [1.0, 2.0], "b": [1.0, 2.0], "d": [1.0, 2.0]}, "one or two"),
])
def test_bad_grids(vary, match):
    params = {"a": jnp.asarray(2.0), "b": jnp.asarray(1.0), "d": jnp.asarray(0.0), "v": jnp.ones(2)}
    with pytest.raises(ValueError, match=match):
        loss_landscape(bowl, params, vary)


def test_relative_grid_checks_its_span():
    np.testing.assert_allclose(relative_grid(0.5, 3), [-0.5, 0.0, 0.5])
    with pytest.raises(ValueError, match="span"):
        relative_grid(1.5, 3)


def test_diverged_points_are_counted_and_written_as_null(tmp_path):
    # log(a) is NaN for a < 0: those points stand for a simulation that blew up.
    result = loss_landscape(lambda p: jnp.log(p["a"]) ** 2 + p["b"] ** 2,
                            {"a": jnp.asarray(1.0), "b": jnp.asarray(0.0)}, {"a": [-1.0, 0.5, 1.0, 2.0], "b": [-1.0, 1.0]})
    assert result.diverged == 2 and result.minimum()["a"] == 1.0
    result.write_json(tmp_path / "l.json")
    assert '"loss": [\n    [\n      null' in (tmp_path / "l.json").read_text()
    result.plot(tmp_path / "l.png")
