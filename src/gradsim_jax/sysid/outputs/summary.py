"""The console summary of a fit: the estimates against the truth (`summary_lines`), the verdict on convergence
(`verdict_line`) and the advice when a fit did not converge (`advice_lines`, `convergence_lines`)."""

from __future__ import annotations


import numpy as np



def _list(values) -> str:
    """Numbers of a per-body list, to 3 significant figures ("a, b")."""
    return ", ".join(f"{v:.3g}" for v in values)


def verdict_line(conv: dict) -> str:
    """"  converged: yes/NO (final loss, initial, noise floor, ratio)" from `Convergence.as_dict()`.

    Args:
        conv: the dict of `Convergence.as_dict()` (non-finite numbers as None)."""
    ratio = conv.get("floor_ratio")
    # as_dict writes non-finite numbers as None (JSON): a fit of 0 iterations has no final loss.
    g = lambda v: "n/a" if v is None else f"{v:.3g}"  # noqa: E731
    return (f"  converged: {'yes' if conv['converged'] else 'NO'} (final loss {g(conv['final_loss'])}, initial "
            f"{g(conv['initial_loss'])}, noise floor {g(conv['noise_floor'])}"
            + (f", {ratio:.3g} x floor" if ratio is not None else "") + ")")


def advice_lines(conv) -> list[str]:
    """The lines after a fit's summary: why it did not converge and what to try, or its notes.

    Args:
        conv: a `fit.convergence.Convergence`, or None (no lines)."""
    if conv is None:
        return []
    if not conv.converged:
        return (["WARNING: the fit did not converge: " + "; ".join(conv.reasons) + "."]
                + [f"  try: {tip}" for tip in conv.advice])
    return [f"note: {tip}" for tip in conv.advice]


def convergence_lines(conv) -> list[str]:
    """The verdict line and the advice of a fit whose report has no `summary_lines`.

    Args:
        conv: a `fit.convergence.Convergence`, or None (no lines)."""
    return [] if conv is None else [verdict_line(conv.as_dict()), *advice_lines(conv)]


#: A quantity of up to this many values (a pendulum's arm lengths) is printed whole by `summary_lines`; a larger
#: one (a velocity per particle) by its count, with its relative error.
SUMMARY_VALUES = 4


def _values(value) -> str:
    flat = np.ravel(np.asarray(value, np.float64))
    return f"{flat[0]:.6g}" if flat.size == 1 else "[" + ", ".join(f"{v:.6g}" for v in flat) + "]"


def summary_lines(report: dict) -> list[str]:
    """Readable lines: each estimated quantity with truth and relative error, identifiability flags.

    Args:
        report: the report dict (`build_report`)."""
    lines = []
    for n in report["free"]:
        values = [report["estimated"][n], report["initial"][n]] + ([report["true"][n]] if "true" in report else [])
        size = int(np.size(values[0]))
        if size > SUMMARY_VALUES:
            line = f"  {n:<10} ({size} values)"
        else:
            shown = [_values(v) for v in values]
            line = f"  {n:<10} estimated {shown[0]}  (initial {shown[1]}"
            line += f", true {shown[2]})" if "true" in report else ")"
        if "relative_error" in report:
            line += f"  relative error {report['relative_error'][n]:.2e}"
        lines.append(line)
    norms = report.get("gradient_norms")
    if norms and norms["per_quantity"]:
        lines.append("  gradient norm (first -> last Adam iteration): " + ", ".join(
            f"{n} {v[0]:.3g} -> {v[-1]:.3g}" for n, v in norms["per_quantity"].items() if v))
    conv = report.get("convergence")
    if conv:
        lines.append(verdict_line(conv))
    if "camera_pose_error" in report:
        err = report["camera_pose_error"]
        lines.append(f"  camera pose off by {err['rotation_deg']:.3g} deg and {err['centre_m'] * 100:.3g} cm")
    energy = report.get("energy")
    if energy:
        unit = energy["unit"]
        line = (f"  energy: {_list(energy['initial'])} -> {_list(energy['final'])} {unit}, "
                f"largest change {_list(energy['max_drift'])} {unit}")
        if "conservative_max_drift" in energy:
            line += (f"; with no dissipation it drifts {_list(energy['conservative_max_drift'])} {unit} "
                     f"(gradSim's limit {energy['edrift']:g}: {'within' if energy['within_edrift'] else 'OVER'})")
        lines.append(line)
    ident = report.get("identifiability")
    if ident and not ident.get("valid", True):
        lines.append("  identifiability: not assessed (the fit did not converge)")
    elif ident:
        cond = ident["condition_number"]
        lines.append(f"  identifiability: cond(J^T J) = {cond:.3g}" if cond else "  identifiability: J^T J singular")
        for combo in ident["unidentifiable_combinations"]:
            lines.append(f"    NOT separable by the video: {combo}")
    return lines
