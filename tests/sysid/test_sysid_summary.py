"""What a fit prints (issue 52): a quantity of a few values (a pendulum's length, a double pendulum's two arms)
shows its estimate beside its relative error, not only a count; every kind of fit ends with its verdict."""

from gradsim_jax.fit.convergence import assess
from gradsim_jax.sysid import convergence_lines
from gradsim_jax.sysid.outputs.summary import summary_lines


def test_a_quantity_of_a_few_values_prints_them():
    report = {"free": ["pendulum_length", "velocity"],
              "estimated": {"pendulum_length": [1.02, 0.98], "velocity": [0.1] * 30},
              "initial": {"pendulum_length": [1.0, 1.7], "velocity": [0.0] * 30},
              "true": {"pendulum_length": [1.0, 1.0], "velocity": [0.1] * 30},
              "relative_error": {"pendulum_length": 0.02, "velocity": 1e-4}}
    length, velocity = summary_lines(report)
    assert length == ("  pendulum_length estimated [1.02, 0.98]  (initial [1, 1.7], true [1, 1])  relative error "
                      "2.00e-02")
    assert velocity.startswith("  velocity   (30 values)  relative error 1.00e-04")
    report = {"free": ["pendulum_length"], "estimated": {"pendulum_length": [1.25]},
              "initial": {"pendulum_length": [1.5]}, "relative_error": {"pendulum_length": 0.25}}
    assert summary_lines(report) == ["  pendulum_length estimated 1.25  (initial 1.5)  relative error 2.50e-01"]


def test_convergence_lines_give_the_verdict_and_what_to_try():
    done = assess(initial_loss=1.0, final_loss=1e-6, floor=1e-6, grad_norm=0.0, last_step=0.0)
    assert convergence_lines(done) == ["  converged: yes (final loss 1e-06, initial 1, noise floor 1e-06, 1 x floor)"]
    stuck = assess(initial_loss=1.0, final_loss=0.5, floor=1e-6, grad_norm=0.1, last_step=0.1)
    verdict, warning, *tips = convergence_lines(stuck)
    assert verdict.startswith("  converged: NO (final loss 0.5") and warning.startswith("WARNING: the fit did not")
    assert tips and all(t.startswith("  try: ") for t in tips)
    assert convergence_lines(None) == []
