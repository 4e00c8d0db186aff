"""Host-side estimate of the memory and time a simulation and its rendering will take, before compiling.

Simple formulas, linear in the element counts, with coefficients measured on a 2-core x86 CPU (jax 0.10,
float32; XLA's `memory_analysis` of the compiled programs for memory, steady-state run time for time;
benchmarks of `simulate`, `render` and `render_dense` for cloth grids of 800 to 77 000 triangles at 16 to 64
pixels). Memory is the peak of the largest program plus what stays resident (scene arrays, videos); it is
within a factor of about 2 of XLA's own figure. Times are for that CPU: an order of magnitude, not a
promise (a GPU is far quicker).

Cost model, per semi-implicit Euler substep: each triangle, bending edge, spring and particle costs a fixed
number of bytes of temporaries and of seconds; a gradient stores one frame's substep states and one substep's
residuals (`simulate` checkpoints every frame and every substep) or every substep's residuals (without
checkpoints). Per rendered frame: binning compares
every face with every 8 x 8 tile; the kernel evaluates `64 x capacity` pixel-face pairs per covered tile,
a chunk of pairs at a time; a Levenberg-Marquardt or identifiability Jacobian renders the compared frames once
more with every column's tangent (forward mode, `JACOBIAN_BATCH` columns at a time, each about one more
render: 5.8 ms a frame and 6.0 ms a column on the pendulum demo), keeping only the chunks in flight.
"""

from __future__ import annotations

import math
import os
from typing import Mapping, NamedTuple, Optional, Union

# Bytes (float32) and seconds per element, measured as the module docstring says.
_SIM_BYTES = {"triangles": 221.0, "bend_edges": 281.0, "springs": 100.0, "particles": 100.0}
_SIM_GRAD_BYTES_PER_SUBSTEP = {"triangles": 370.0, "bend_edges": 550.0, "springs": 150.0, "particles": 150.0}
# Forward seconds per element and substep, measured on a 2-core AMD EPYC (2026-12-07) from fits of the photoreal
# swing (examples/blender_cloth: 289 particles, 512 triangles; 0.10 s for the forward and gradient of 960
# substeps) and the same with its 736 bending edges (0.43 s more a fit iteration): a bending edge costs five
# triangles. (Earlier values, 2e-7 a triangle and 4e-7 a bending edge, made those fits' estimates 40-60 % high.)
_SIM_SECONDS_PER_SUBSTEP = {"triangles": 2.0e-8, "bend_edges": 1.0e-7, "springs": 2.0e-8, "particles": 1.0e-8}
_SIM_GRAD_TIME_FACTOR = 6.0  # forward, recomputation of each checkpointed frame, backward
#: Blender's collision response (`physics.impulse_contact`), per candidate pair and round of a step, forward:
#: 280-320 ms a step for 40,964 pairs x 3 rounds on Blender's drape (2-core CPU, float32; bench_drape_contact.py).
#: An upper bound: a step with fewer candidates runs a smaller program (`impulse_contact._bucket_sizes`).
_CONTACT_SECONDS_PER_PAIR_ROUND = 2.3e-6
#: Its forward and gradient together (the gradient's checkpointed recomputation included): 4x the forward there.
_CONTACT_GRAD_TIME_FACTOR = 4.0
_BIN_BYTES = 5.0  # per (tile, face): the binning scores and their top-k
_BIN_GRAD_BYTES = 18.0
_FACE_BYTES = 60.0  # per face: the screen-space face table
_PAIR_CHUNK_BYTES = 12.0  # per pixel-face pair of one chunk in flight
_PAIR_CHUNK_GRAD_BYTES = 120.0
_PAIR_RESIDUAL_BYTES = 1.7  # per pixel-face pair kept for the backward pass
_BIN_SECONDS = 1.2e-8  # per (tile, face)
_PAIR_SECONDS = 1.6e-8  # per pixel-face pair
_RENDER_GRAD_TIME_FACTOR = 6.0
_JACOBIAN_COLUMN_FACTOR = 1.0  # a forward-mode column costs about one more render
_JACOBIAN_BATCH = 4  # fit.least_squares.JACOBIAN_BATCH (physics does not import fit)
_PAIRS_PER_CHUNK = 16384  # RenderSettings.pairs_per_chunk
_TILE = 8  # RenderSettings.tile_size
_FIXED_BYTES = 64 * 2**20  # the runtime and small buffers


class CostEstimate(NamedTuple):
    """memory_bytes: peak memory (bytes); seconds: run time on the calibration CPU, compilation aside;
    text: a readable line with the breakdown."""

    memory_bytes: int
    seconds: float
    text: str


def element_counts(topology) -> dict:
    """{"particles", "triangles", "bend_edges", "springs"} of a Topology, or of a mapping with those keys
    (missing ones are 0), e.g. `gradsim_jax.geometry.cloth_grid_counts(2000, 2000)`.

    Args:
      topology: a Topology, or a mapping of counts.

    Returns:
      {"particles", "triangles", "bend_edges", "springs"}: int counts.
    """
    if isinstance(topology, Mapping):
        return {k: int(topology.get(k, 0)) for k in _SIM_BYTES}
    return {"particles": int(topology.num_particles), "triangles": int(topology.cloth.triangles.shape[0]),
            "bend_edges": int(topology.cloth.bend_edges.shape[0]), "springs": int(topology.springs.pairs.shape[0])}


def _per_element(coefficients: dict, counts: dict) -> float:
    return sum(coefficients[k] * counts[k] for k in coefficients)


def human_bytes(n: float) -> str:
    """A byte count for people: "1.5 GB", "20 MB", "3 KB", "12 B" (binary units).

    Args:
      n: bytes.

    Returns:
      the text.
    """
    for unit, size in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def human_seconds(s: float) -> str:
    """A duration for people: days, hours, minutes or seconds, two or three digits.

    Args:
      s: seconds.

    Returns:
      the text.
    """
    if s >= 2 * 86400:
        return f"{s / 86400:.3g} days"
    if s >= 3600:
        return f"{s / 3600:.2g} h"
    if s >= 60:
        return f"{s / 60:.2g} min"
    return f"{s:.2g} s"


def _simulation_cost(counts: Mapping, frames: int, substeps: int, gradient: bool, checkpoint: bool,
                     itemsize: int, step_cost: float = 1.0, contact_seconds: float = 0.0) -> tuple[float, float]:
    """(bytes, seconds) of simulating (and with `gradient`, differentiating) one evaluation; `contact_seconds`: a
    step's contact beyond the forces (Blender's collision response), forward."""
    n = counts["particles"]
    scale = itemsize / 4.0
    states = (frames + 1) * n * 6 * itemsize  # x and v of every frame
    sim_bytes = scale * _per_element(_SIM_BYTES, counts) + states
    step_seconds = _per_element(_SIM_SECONDS_PER_SUBSTEP, counts) * step_cost
    sim_seconds = frames * substeps * step_seconds
    if gradient:
        residuals = _per_element(_SIM_GRAD_BYTES_PER_SUBSTEP, counts)
        # Per frame (the default): the state before each of one frame's substeps, one substep's residuals.
        stored = substeps * n * 24.0 + residuals if checkpoint else frames * substeps * residuals
        sim_bytes += scale * stored + 2 * states
        sim_seconds *= _SIM_GRAD_TIME_FACTOR
    contact = frames * substeps * contact_seconds
    return sim_bytes, sim_seconds + (contact * _CONTACT_GRAD_TIME_FACTOR if gradient else contact)


def _render_cost(faces: int, frames: int, render_size: tuple[int, int], frames_rendered: Optional[int],
                 gradient: bool, tile_capacity: Optional[int], pixel_capacity: Optional[int], dense_frames: int,
                 dense_columns: int, itemsize: int) -> tuple[dict, float]:
    """({"render": (bytes, seconds)[, "Jacobian render": (bytes, seconds)]}, the video's bytes) of rendering
    one evaluation's frames (and a forward-mode Jacobian's)."""
    scale = itemsize / 4.0
    parts = {}
    height, width = render_size
    rendered = frames + 1 if frames_rendered is None else frames_rendered
    tiles = math.ceil(height / _TILE) * math.ceil(width / _TILE)
    capacity = min(tile_capacity or faces, faces)
    pair_capacity = min(pixel_capacity, capacity) if pixel_capacity and pixel_capacity < capacity else capacity
    pixels_per_tile = _TILE * _TILE
    chunk_pairs = max(min(_PAIRS_PER_CHUNK, tiles * pixels_per_tile * pair_capacity),
                      pixels_per_tile * pair_capacity)
    pairs = tiles * pixels_per_tile * pair_capacity  # every tile covered: an upper bound
    video = rendered * height * width * 4 * itemsize
    if gradient:
        render_bytes = scale * (faces * _FACE_BYTES + tiles * faces * _BIN_GRAD_BYTES
                                + chunk_pairs * _PAIR_CHUNK_GRAD_BYTES + pairs * _PAIR_RESIDUAL_BYTES)
        render_seconds = rendered * (2 * tiles * faces * _BIN_SECONDS
                                     + _RENDER_GRAD_TIME_FACTOR * pairs * _PAIR_SECONDS)
    else:
        render_bytes = scale * (faces * _FACE_BYTES + tiles * faces * _BIN_BYTES
                                + chunk_pairs * _PAIR_CHUNK_BYTES)
        render_seconds = rendered * (tiles * faces * _BIN_SECONDS + pairs * _PAIR_SECONDS)
    parts["render"] = (render_bytes + video, render_seconds)
    if dense_frames:
        batch = min(_JACOBIAN_BATCH, max(1, dense_columns))
        parts["Jacobian render"] = (
            scale * (faces * _FACE_BYTES + tiles * faces * _BIN_BYTES
                     + (1 + batch) * chunk_pairs * _PAIR_CHUNK_BYTES) + batch * video,
            dense_frames * (tiles * faces * _BIN_SECONDS + pairs * _PAIR_SECONDS)
            * (1.0 + _JACOBIAN_COLUMN_FACTOR * dense_columns))
    return parts, video


def estimate_cost(
    topology: Union[object, Mapping],
    frames: int,
    substeps: int,
    *,
    render_size: Optional[tuple[int, int]] = None,
    frames_rendered: Optional[int] = None,
    gradient: bool = False,
    checkpoint: bool = True,
    iterations: int = 1,
    tile_capacity: Optional[int] = None,
    pixel_capacity: Optional[int] = None,
    dense_frames: int = 0,
    dense_columns: int = 0,
    dense_passes: int = 1,
    itemsize: int = 4,
    step_cost: float = 1.0,
    contact_pair_rounds: int = 0,
) -> CostEstimate:
    """Memory and time of simulating `frames` frames of `substeps` substeps (and rendering them).

    Args:
      topology: a Topology, or counts {"particles", "triangles", "bend_edges", "springs"}.
      frames: frames simulated per evaluation.
      substeps: simulation substeps per frame.
      render_size: (height, width) in pixels, or None for no rendering.
      frames_rendered: frames rendered per evaluation (default frames + 1).
      gradient: each of `iterations` evaluations is also differentiated (a fit).
      checkpoint: as in `simulate` (True: the state is stored per frame and each frame's substeps recomputed).
      iterations: evaluations (a fit's iterations).
      tile_capacity: the renderer's faces per tile (None: every face, as scene files default to).
      pixel_capacity: the renderer's faces per pixel (None: as many as per tile).
      dense_frames: frames a forward-mode Jacobian renders (Levenberg-Marquardt, identifiability); 0: not used.
      dense_columns: that Jacobian's columns (free scalars).
      dense_passes: how many such Jacobians a run makes (a Levenberg-Marquardt step each, and the report's).
      itemsize: bytes per float (8 for float64).
      step_cost: the time of one substep in semi-implicit Euler substeps (`Integrator.step_cost()`: 1, or about
        43 for the implicit step's 40 conjugate-gradient iterations).
      contact_pair_rounds: the candidate pairs Blender's collision response tests per substep, times its rounds
        (`ImpulseContact.pair_capacity` x `rounds`; 0: none), each about 2.3 us on a 2-core CPU.
    Returns:
      CostEstimate(memory_bytes, seconds, text).
    """
    counts = element_counts(topology)
    n, faces = counts["particles"], counts["triangles"]
    scale = itemsize / 4.0
    stepped = counts
    cloth = getattr(topology, "cloth", None)
    if cloth is not None and not (cloth.membrane or cloth.aerodynamics):  # triangles only drawn, not stepped
        stepped = dict(counts, triangles=0)
    parts = {"simulation": _simulation_cost(stepped, frames, substeps, gradient, checkpoint, itemsize, step_cost,
                                            contact_pair_rounds * _CONTACT_SECONDS_PER_PAIR_ROUND)}
    resident = scale * 16.0 * sum(counts.values())  # the scene's own arrays
    if render_size is not None and faces:
        rendering, video = _render_cost(faces, frames, render_size, frames_rendered, gradient, tile_capacity,
                                        pixel_capacity, dense_frames, dense_columns, itemsize)
        parts.update(rendering)
        resident += video
    # The simulation and the render of one evaluation are one program; a Jacobian's is another.
    evaluation = sum(b for name, (b, _) in parts.items() if name != "Jacobian render")
    peak = max([evaluation] + [b for name, (b, _) in parts.items() if name == "Jacobian render"])
    memory = int(peak + resident + _FIXED_BYTES)
    per_evaluation = sum(s for name, (_, s) in parts.items() if name != "Jacobian render")
    seconds = (max(1, iterations) * per_evaluation
               + max(1, dense_passes) * parts.get("Jacobian render", (0, 0.0))[1])
    detail = ", ".join(f"{name} {human_bytes(b)} / {human_seconds(s)}" for name, (b, s) in parts.items())
    text = (f"{n} particles, {faces} triangles, {counts['bend_edges']} bending edges: about "
            f"{human_bytes(memory)} of memory and {human_seconds(seconds)} of run time ({detail}; measured on "
            "a 2-core CPU)")
    return CostEstimate(memory, float(seconds), text)


def available_memory_bytes() -> Optional[int]:
    """Memory the computation can still use, or None when unknown: on an accelerator the default device's
    free memory (`memory_stats`), on the CPU MemAvailable of /proc/meminfo (else the free physical pages)."""
    import jax

    device = jax.devices()[0]
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        if "bytes_limit" in stats:
            return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
        return None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None
