"""Host-side builders of scenes and meshes."""

from gradsim_jax.geometry.scene import (
    Scene, cloth_grid, cloth_grid_counts, cloth_mesh, combine, interior_edges, particles, quat_from_axis_angle,
)

__all__ = ["Scene", "cloth_grid", "cloth_grid_counts", "cloth_mesh", "combine", "interior_edges", "particles",
           "quat_from_axis_angle"]
