"""report.html: the page a person opens first after a fit, a demo or a control run, written beside every
report.json (`write_html`, called by `report.write_report`).

One self-contained file, no server: the target and fitted (or trained) videos side by side as inlined GIFs,
the side-by-side comparison.mp4, the loss curve and the gradient-norm curves, the estimates with their
standard errors (the Gauss-Newton report of the fit's Jacobian) and the true values when known, the
convergence verdict, and what to try next when the fit did not converge. Every picture and video is a
data URI, so the file can be mailed or attached as it is. A small script marks the page's media as loaded
(`document.body.dataset.media`: "ok", or what failed), which the test reads in headless Chromium.
"""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Optional

import numpy as np

from gradsim_jax.files import atomic_file

_MIME = {".gif": "image/gif", ".png": "image/png", ".mp4": "video/mp4"}

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
.verdict { padding: 0.8em 1em; border-radius: 6px; margin: 1em 0; }
.ok { background: #e7f6e7; border: 1px solid #8c8; } .bad { background: #fdecea; border: 1px solid #e99; }
.info { background: #eef2fb; border: 1px solid #9ab; }
.row { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
figure { margin: 0; text-align: center; } figcaption { font-size: 0.9em; color: #555; }
img.frame { image-rendering: pixelated; width: 256px; }
video { width: 100%; max-width: 800px; image-rendering: pixelated; }
img.plot { max-width: 520px; } img.wide { max-width: 100%; }
table { border-collapse: collapse; margin: 0.5em 0; } td, th { border: 1px solid #ccc; padding: 0.25em 0.6em; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code { background: #f4f4f4; padding: 0 0.2em; }
"""

_CHECK = """
<script>
const pageErrors = [];
window.addEventListener("error", e => pageErrors.push("error " + (e.message || e.type)), true);
window.addEventListener("load", () => {
  const bad = pageErrors;
  document.querySelectorAll("img").forEach((img, i) => { if (!img.complete || img.naturalWidth === 0) bad.push("img " + i); });
  const videos = Array.from(document.querySelectorAll("video"));
  const settle = () => {
    videos.forEach((v, i) => { if (v.error || v.readyState < 1) bad.push("video " + i); });
    document.body.dataset.media = bad.length ? bad.join(",") : "ok";
  };
  Promise.all(videos.map(v => v.readyState >= 1 ? null : new Promise(done => {
    v.addEventListener("loadedmetadata", done); v.addEventListener("error", done); setTimeout(done, 3000);
  }))).then(settle);
});
</script>
"""


def _data_uri(path: Path) -> Optional[str]:
    if not path.is_file():
        return None
    return f"data:{_MIME[path.suffix]};base64,{base64.b64encode(path.read_bytes()).decode()}"


def _e(x) -> str:
    return html.escape(str(x))


def _num(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, (list, tuple)) or np.ndim(x):
        a = np.asarray(x, float)
        return f"{a.size} values, mean {np.mean(a):.6g}" if a.size > 4 else _e(np.round(a, 6).tolist())
    x = float(x)
    return "-" if not math.isfinite(x) else f"{x:.6g}"


def _stderrs(report: dict) -> dict:
    """{quantity: standard error in its unit} of the scalar quantities, from the identifiability report."""
    ident = report.get("identifiability") or {}
    out = {}
    for label, err in zip(ident.get("labels", []), ident.get("stderr_physical", [])):
        name = label[4:-1] if label.startswith("log(") and label.endswith(")") else label
        if "[" not in name and err is not None:
            out[name] = err
    return out


def _svg_curves(curves: dict, title: str, width: int = 520, height: int = 240) -> str:
    """A log-scale line chart of {label: [values]} as inline SVG (no picture file needed)."""
    series = {k: np.asarray(v, float) for k, v in curves.items() if len(v)}
    series = {k: v for k, v in series.items() if np.any(np.isfinite(v) & (v > 0))}
    if not series:
        return ""
    values = np.concatenate([v[np.isfinite(v) & (v > 0)] for v in series.values()])
    lo, hi = math.log10(values.min()), math.log10(values.max())
    hi = hi if hi > lo else lo + 1.0
    n = max(len(v) for v in series.values())
    pad_l, pad_b, pad_t = 60, 30, 20
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">',
             f'<text x="{width / 2}" y="14" text-anchor="middle" font-size="13">{_e(title)}</text>',
             f'<line x1="{pad_l}" y1="{height - pad_b}" x2="{width - 10}" y2="{height - pad_b}" stroke="#888"/>',
             f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{height - pad_b}" stroke="#888"/>']
    for k in range(math.floor(lo), math.ceil(hi) + 1):
        y = height - pad_b - (k - lo) / (hi - lo) * (height - pad_b - pad_t)
        if pad_t - 1 <= y <= height - pad_b + 1:
            parts.append(f'<text x="{pad_l - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="11">1e{k}</text>')
    parts.append(f'<text x="{(width + pad_l) / 2}" y="{height - 6}" text-anchor="middle" font-size="11">'
                 f'iteration (0 to {n - 1})</text>')
    for i, (label, v) in enumerate(series.items()):
        pts = [(pad_l + j / max(n - 1, 1) * (width - 10 - pad_l),
                height - pad_b - (math.log10(y) - lo) / (hi - lo) * (height - pad_b - pad_t))
               for j, y in enumerate(v) if math.isfinite(y) and y > 0]
        color = colors[i % len(colors)]
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="'
                     + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
        parts.append(f'<text x="{width - 14}" y="{pad_t + 14 * (i + 1)}" text-anchor="end" font-size="11" '
                     f'fill="{color}">{_e(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _verdict(report: dict) -> str:
    conv = report.get("convergence")
    if conv:
        ok = bool(conv.get("converged"))
        lines = [f"<strong>{'Converged' if ok else 'Not converged'}.</strong> Final loss "
                 f"{_num(conv.get('final_loss'))} ({_num(conv.get('floor_ratio'))} x the target's noise floor "
                 f"{_num(conv.get('noise_floor'))}; {_num(conv.get('loss_ratio'))} x the initial loss)."]
        if conv.get("reasons"):
            lines.append("<p>Why not:</p><ul>" + "".join(f"<li>{_e(r)}</li>" for r in conv["reasons"]) + "</ul>")
        if conv.get("advice"):
            lines.append("<p><strong>What to try next:</strong></p><ul>"
                         + "".join(f"<li>{_e(a)}</li>" for a in conv["advice"]) + "</ul>")
        if report.get("kept_start"):
            lines.append("<p>The fit ended above its start's loss: the start is the estimate.</p>")
        return f'<div class="verdict {"ok" if ok else "bad"}">' + "".join(lines) + "</div>"
    if "trained_final_error_m" in report:
        b = report.get("random_baseline", {})
        ratio = report.get("ratio_random_mean_over_trained")
        ok = ratio is not None and ratio > 1
        return (f'<div class="verdict {"ok" if ok else "bad"}"><strong>Trained policy:</strong> final centre of mass '
                f'{_num(report["trained_final_error_m"])} m from the target (untrained '
                f'{_num(report.get("untrained_final_error_m"))} m; {b.get("n", "?")} random policies: mean '
                f'{_num(b.get("mean_m"))} m, best {_num(b.get("best_m"))} m), {_num(ratio)} x closer than the random '
                "mean.</div>")
    if "velocity_relative_error" in report:
        e = report.get("final_position_error", {})
        return (f'<div class="verdict info"><strong>Initial velocity</strong> found to a relative error of '
                f'{_num(report["velocity_relative_error"])}; the cloth lands {_num(1000 * e.get("center_error_m", float("nan")))} '
                f'mm from the target over a {_num(e.get("travel_m"))} m throw.</div>')
    return ""


def _estimates(report: dict) -> str:
    est = report.get("estimated")
    if not est:
        return ""
    units, initial, true = report.get("units", {}), report.get("initial", {}), report.get("true") or {}
    errors, stderr = report.get("relative_error") or {}, _stderrs(report)
    head = "<tr><th>quantity</th><th>unit</th><th>start</th><th>estimate</th><th>standard error</th>"
    head += "<th>true</th><th>relative error</th></tr>" if true else "</tr>"
    rows = []
    for q, value in est.items():
        cells = [_e(q), _e(units.get(q, "")), _num(initial.get(q)), _num(value),
                 _num(stderr.get(q)) if q in stderr else "-"]
        if true:
            err = errors.get(q)
            cells += [_num(true.get(q)), _num(np.mean(err)) + (" (mean)" if np.ndim(err) else "") if err is not None
                      else "-"]
        rows.append("<tr>" + "".join(f'<td class="num">{c}</td>' if i > 1 else f"<td>{c}</td>"
                                     for i, c in enumerate(cells)) + "</tr>")
    ident = report.get("identifiability") or {}
    note = ""
    if ident:
        combos = ident.get("unidentifiable_combinations") or []
        note = (f"<p>Gauss-Newton report of the fit's Jacobian: condition number {_num(ident.get('condition_number'))}"
                + ("; <strong>not identifiable</strong>: " + ", ".join(_e(c) for c in combos) if combos else
                   "; every quantity is identifiable from this video") + ".</p>")
    return "<h2>Estimates</h2><table>" + head + "".join(rows) + "</table>" + note


def _media(folder: Path, report: dict) -> str:
    names = (("target", "target.gif"), ("untrained", "untrained.gif"), ("initial", "initial.gif"),
             ("fitted", "fitted.gif"), ("trained", "trained.gif"), ("target image", "target.png"))
    figures = []
    for label, name in names:
        uri = _data_uri(folder / name)
        if uri:
            figures.append(f'<figure><img class="frame" src="{uri}" alt="{_e(label)}"><figcaption>{_e(label)}'
                           "</figcaption></figure>")
    out = ""
    if figures:
        out += '<h2>Videos</h2><div class="row">' + "".join(figures) + "</div>"
    uri = _data_uri(folder / "comparison.mp4")
    if uri:
        out += (f'<p>Side by side (comparison.mp4):</p><video src="{uri}" controls loop muted autoplay playsinline>'
                "</video>")
    return out


def _curves(folder: Path, report: dict) -> str:
    out = []
    for name, label, cls in (("loss.png", "loss", "plot"), ("params.png", "estimates against iterations", "wide")):
        uri = _data_uri(folder / name)
        if uri:
            out.append(f'<figure><img class="{cls}" src="{uri}" alt="{label}"><figcaption>{label}</figcaption>'
                       "</figure>")
    norms = report.get("gradient_norms") or {}
    curves = {"total": norms.get("total", [])}
    curves.update({k: v for k, v in (norms.get("per_quantity") or {}).items() if len(curves) < 6})
    svg = _svg_curves(curves, "gradient norm (before clipping)")
    if svg:
        out.append(f"<figure>{svg}<figcaption>gradient norm per Adam iteration</figcaption></figure>")
    return '<h2>Curves</h2><div class="row">' + "".join(out) + "</div>" if out else ""


_PREDICTION_COLUMNS = (("iou", "IoU", "{:.3f}"), ("psnr_mask", "PSNR in mask, dB", "{:.1f}"),
                       ("psnr", "PSNR, dB", "{:.1f}"), ("vertex_error_relative", "vertex error, % of size",
                                                         "{:.2%}"))
_MOTIONS = (("fit", "fitted quantities"), ("initial", "initial guess"), ("frozen", "last fitted frame held"),
            ("reference", "reference motion, drawn here"))


def _prediction(folder: Path, report: dict) -> str:
    pred = report.get("prediction")
    if not pred:
        return ""
    summary = pred.get("summary") or {}
    columns = [c for c in _PREDICTION_COLUMNS
               if any((summary.get(m) or {}).get(span, {}).get(c[0]) is not None
                      for m, _ in _MOTIONS for span in ("fitted", "held_out"))]
    head = "".join(f"<th>{_e(label)}</th>" for _, label, _ in columns)
    rows = []
    for motion, label in _MOTIONS:
        if motion not in summary:
            continue
        for span, span_label in (("fitted", "fitted frames"), ("held_out", "held-out frames")):
            values = (summary.get(motion) or {}).get(span) or {}
            cells = "".join(f'<td class="num">{_e("-" if values.get(k) is None else fmt.format(values[k]))}</td>'
                            for k, _, fmt in columns)
            rows.append(f"<tr><td>{_e(label)}</td><td>{span_label}</td>{cells}</tr>")
    held = pred.get("frames", 0) - pred.get("fitted_frames", 0)
    out = (f"<h2>Prediction</h2><p>Frames 0-{pred.get('fitted_frames', 0) - 1} were fitted; the next {held} were "
           "predicted by simulating the fitted scene on (held out).</p>"
           f"<table><tr><th>motion</th><th>frames</th>{head}</tr>{''.join(rows)}</table>")
    uri = _data_uri(folder / "prediction.png")
    if uri:
        out += f'<figure><img class="wide" src="{uri}" alt="scores per frame"><figcaption>scores per frame' \
               "</figcaption></figure>"
    uri = _data_uri(folder / "prediction.mp4")
    if uri:
        out += (f'<p>Target, prediction and the last fitted frame held (prediction.mp4):</p><video src="{uri}" '
                "controls loop muted autoplay playsinline></video>")
    return out


def render_html(report: dict, folder) -> str:
    """The page of `report` (a report.json's dict), with the pictures and videos found in `folder` inlined.

    Args:
        report: the report dict, as read from report.json.
        folder: the folder whose GIF, PNG and MP4 files are inlined as data URIs.

    Returns:
        the page's HTML text.
    """
    folder = Path(folder)
    name = report.get("experiment") or report.get("command") or "report"
    what = report.get("command") or ""
    iters = report.get("iterations")
    facts = []
    if isinstance(iters, dict):
        facts.append(f"{iters.get('adam', 0)} Adam iterations, {iters.get('levenberg_marquardt', 0)} "
                     f"Levenberg-Marquardt steps, {iters.get('rounds', 1)} round(s)")
    elif iters is not None:
        facts.append(f"{iters} iterations")
    wall = report.get("total_wall_time_s", report.get("wall_time_s"))
    if wall is not None:
        facts.append(f"{float(wall):.1f} s")
    if report.get("image_size"):
        facts.append(f"{report['image_size'][0]} x {report['image_size'][1]} px, {report.get('frames', '?')} frames")
    versions = report.get("versions") or {}
    details = "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in versions.items())
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>gradsim-jax: {_e(name)}</title>", f"<style>{_STYLE}</style></head><body>",
        f"<h1>gradsim-jax: {_e(name)}</h1>",
        f"<p>{_e(what)}{' &middot; ' if what and facts else ''}{_e('; '.join(facts))}</p>",
        _verdict(report), _media(folder, report), _prediction(folder, report), _estimates(report),
        _curves(folder, report),
        "<h2>Files</h2><p>report.json (everything on this page, and the fit's inputs), the GIFs, comparison.mp4, "
        "loss.png and params.png are beside this page.</p>",
        f"<details><summary>versions</summary><table>{details}</table></details>" if details else "",
        _CHECK, "</body></html>",
    ])


def write_html(json_path, report: dict) -> Path:
    """Write report.html beside `json_path` (atomically) from `report`; return its path.

    Args:
        json_path: the report.json's path (report.html goes in its folder).
        report: the report dict, as written to report.json.

    Returns:
        the path of report.html.
    """
    folder = Path(json_path).parent
    path = folder / "report.html"
    text = render_html(report, folder)
    with atomic_file(path) as temporary:
        Path(temporary).write_text(text)
    return path
