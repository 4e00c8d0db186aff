"""Host-side builders of scenes and meshes, and mesh files read from disk."""

from gradsim_jax.geometry.obj import MeshFileError, read_obj
from gradsim_jax.geometry.scene import (
    Scene, cloth_grid, cloth_grid_counts, cloth_mesh, combine, interior_edges, particles, quat_from_axis_angle,
)

__all__ = ["MeshFileError", "Scene", "cloth_grid", "cloth_grid_counts", "cloth_mesh", "combine", "interior_edges",
           "particles", "quat_from_axis_angle", "read_obj"]
