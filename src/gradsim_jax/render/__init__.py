"""Differentiable rendering of whatever the physics simulates (cloth, rigid bodies, soft bodies' surfaces):
cameras and calibrations, the tiled rasterizer (SoftRas coverage, the box coverage a camera sees, or DIB-R),
shading, blur, density fields (smoke) head-on or as a slab through a camera, and video files in (`target`) and
out (`video`)."""

from gradsim_jax.render.camera import (
    Camera,
    camera_from_eye,
    look_at_camera,
    pixel_centers,
    project,
    world_to_camera,
)
from gradsim_jax.render.appearance import APPEARANCE_MODELS, Appearance, appearance, appearance_of
from gradsim_jax.render.coverage_models import CoverageModel, composite, coverage_model
from gradsim_jax.render.density import SmokeLook, density_image, density_slab_image, smoke_over
from gradsim_jax.render.coverage_models import COVERAGE_MODELS
from gradsim_jax.render.rasterize import (
    RenderSettings, RenderStats, render, render_dense, render_video, render_with_stats, silhouette,
    suggest_capacities
)
from gradsim_jax.render.shading import FaceColors, Lights, Texture, VertexColors, default_lights
from gradsim_jax.render.video import (
    TargetVideo,
    load_target,
    load_video,
    side_by_side,
    write_comparison,
    write_gif,
    write_mp4,
    write_png_folder,
    write_video,
)

__all__ = [
    "APPEARANCE_MODELS",
    "Appearance",
    "COVERAGE_MODELS",
    "CoverageModel",
    "Camera",
    "FaceColors",
    "Lights",
    "RenderSettings",
    "RenderStats",
    "TargetVideo",
    "appearance",
    "appearance_of",
    "coverage_model",
    "Texture",
    "VertexColors",
    "camera_from_eye",
    "composite",
    "default_lights",
    "SmokeLook",
    "density_image",
    "density_slab_image",
    "smoke_over",
    "look_at_camera",
    "load_target",
    "load_video",
    "pixel_centers",
    "project",
    "render",
    "render_dense",
    "render_video",
    "render_with_stats",
    "side_by_side",
    "silhouette",
    "suggest_capacities",
    "world_to_camera",
    "write_comparison",
    "write_gif",
    "write_mp4",
    "write_png_folder",
    "write_video",
]
