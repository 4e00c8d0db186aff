"""report.html: one self-contained page beside every report.json (sysid.outputs.html)."""

import json

import numpy as np

from browser import body_data, loaded_dom
from gradsim_jax.render.video import write_comparison, write_gif
from gradsim_jax.sysid import write_report
from gradsim_jax.sysid.outputs.html import render_html

REPORT = {
    "experiment": "a <scene>", "command": "fit scene.toml", "free": ["mass", "stiffness"],
    "frames": 4, "image_size": [16, 16],
    "estimated": {"mass": 0.0213, "stiffness": 187.5}, "initial": {"mass": 0.03, "stiffness": 120.0},
    "units": {"mass": "kg", "stiffness": "N/m"}, "true": {"mass": 0.02, "stiffness": 200.0},
    "relative_error": {"mass": 0.065, "stiffness": 0.0625},
    "iterations": {"adam": 3, "levenberg_marquardt": 1, "rounds": 1},
    "convergence": {"converged": False, "final_loss": 3e-4, "noise_floor": 1e-6, "floor_ratio": 300.0,
                    "loss_ratio": 0.1, "reasons": ["the loss is 300 x the noise floor"],
                    "advice": ["try --rounds 3 & a <mask>"]},
    "identifiability": {"labels": ["log(mass)", "log(stiffness)"], "stderr_physical": [1.5e-4, 2.5],
                        "condition_number": 12.0, "unidentifiable_combinations": []},
    "gradient_norms": {"total": [1.0, 0.5, 0.25], "per_quantity": {"mass": [0.9, 0.4, 0.2]}},
    "versions": {"jax": "x"},
}


def _outputs(folder):
    rng = np.random.default_rng(0)
    video = rng.uniform(size=(4, 16, 16, 4)).astype(np.float32)
    for name in ("target", "initial", "fitted"):
        write_gif(folder / f"{name}.gif", video, 10.0)
    write_comparison(folder / "comparison.mp4", [video, video, video], ["target", "initial", "fitted"], fps=10.0)


def test_report_html_is_written_beside_report_json_with_everything_inlined(tmp_path):
    _outputs(tmp_path)
    write_report(tmp_path / "report.json", REPORT)
    page = (tmp_path / "report.html").read_text()
    assert json.loads((tmp_path / "report.json").read_text()) == REPORT
    assert page.count("data:image/gif;base64,") == 3 and page.count("data:video/mp4;base64,") == 1
    assert "Not converged" in page and "What to try next" in page
    assert "try --rounds 3 &amp; a &lt;mask&gt;" in page and "a &lt;scene&gt;" in page  # escaped
    assert "0.00015" in page and "2.5" in page  # the standard errors beside the estimates
    assert "<svg" in page  # the gradient-norm curves
    assert "src=\"http" not in page and "href=\"http" not in page  # nothing to fetch: one file
    # Other JSON files the commands write (gradcheck.json, ...) get no page.
    write_report(tmp_path / "other.json", {"a": 1})
    assert not (tmp_path / "other.html").exists()


def test_report_html_of_a_control_run_says_how_the_policy_did(tmp_path):
    report = {"experiment": "control-cloth", "trained_final_error_m": 0.01, "untrained_final_error_m": 0.3,
              "random_baseline": {"n": 4, "mean_m": 0.5, "best_m": 0.2}, "ratio_random_mean_over_trained": 50.0}
    page = render_html(report, tmp_path)
    assert "Trained policy" in page and "50" in page


def test_report_html_loads_in_headless_chromium(tmp_path):
    _outputs(tmp_path)
    write_report(tmp_path / "report.json", REPORT)
    dom = loaded_dom(tmp_path / "report.html")
    assert body_data(dom, "media") == "ok", body_data(dom, "media")
    assert "Not converged" in dom
