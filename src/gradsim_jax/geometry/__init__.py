"""Host-side builders of scenes and meshes, and mesh files read from disk."""

from gradsim_jax.geometry.obj import MeshFileError, read_obj
from gradsim_jax.geometry.rigid import (
    MassProperties, MeshError, RigidShape, box_mesh, capsule_mesh, check_closed_mesh, cone_mesh, cylinder_mesh,
    load_mesh, mass_properties, rigid_body_from_mesh, sphere_mesh,
)
from gradsim_jax.geometry.scene import (
    Scene, cloth_grid, cloth_grid_counts, cloth_mesh, combine, interior_edges, particles, quat_from_axis_angle,
    rigid_body,
)

__all__ = ["MassProperties", "MeshError", "MeshFileError", "RigidShape", "Scene", "box_mesh", "capsule_mesh",
           "check_closed_mesh", "cloth_grid", "cloth_grid_counts", "cloth_mesh", "combine", "cone_mesh",
           "cylinder_mesh", "interior_edges", "load_mesh", "mass_properties", "particles", "quat_from_axis_angle",
           "read_obj", "rigid_body", "rigid_body_from_mesh", "sphere_mesh"]
