"""Host-side builders of scenes (cloth, rigid bodies, FEM soft bodies, particles, ODE bodies, smoke) and meshes, and mesh files
read from disk. A `Scene` is the host description; `Scene.build()` makes the device trees (Topology, Params,
State) the physics runs on."""

from gradsim_jax.geometry.build_options import Contact, Environment, Numerics
from gradsim_jax.geometry.obj import MeshFileError, read_obj
from gradsim_jax.geometry.rigid import (
    MassProperties, MeshError, RigidShape, check_closed_mesh, load_mesh, mass_properties, rigid_body_from_mesh
)
from gradsim_jax.geometry.primitives import (
    box_mesh, capsule_mesh, cone_mesh, cylinder_mesh, sphere_mesh, superquadric_mesh
)
from gradsim_jax.geometry.cloth import cloth_grid, cloth_grid_counts, cloth_mesh, interior_edges, mesh_edges
from gradsim_jax.geometry.ode import ode_body, pendulum
from gradsim_jax.geometry.colliders import collider
from gradsim_jax.geometry.scene import Scene, combine, particles, rigid_body
from gradsim_jax.geometry.rotations import quat_from_axis_angle
from gradsim_jax.geometry.soft import soft_body
from gradsim_jax.geometry.smoke import box_mask, disc_mask, smoke_grid
from gradsim_jax.geometry.tet_files import load_tets, save_tets, tetrahedralize
from gradsim_jax.geometry.tet_shapes import (
    box_tets, cylinder_tets, extrude_tets, gear_outline, gear_tets, sphere_tets, voxel_tets, walker_tets,
)
from gradsim_jax.geometry.tets import (
    check_tets, lumped_masses, orient_tets, tet_surface, tet_volumes,
)

__all__ = ["Contact", "Environment", "Numerics", "MassProperties", "collider", "MeshError", "MeshFileError", "RigidShape", "Scene", "box_mesh", "box_tets", "capsule_mesh",
           "check_closed_mesh", "check_tets", "cylinder_tets", "extrude_tets", "gear_outline", "gear_tets",
           "load_tets", "save_tets", "sphere_tets", "tetrahedralize", "voxel_tets", "walker_tets", "cloth_grid", "cloth_grid_counts", "cloth_mesh", "combine", "cone_mesh",
           "cylinder_mesh", "interior_edges", "mesh_edges", "load_mesh", "lumped_masses", "mass_properties", "orient_tets", "particles", "quat_from_axis_angle",
           "ode_body", "pendulum", "read_obj", "box_mask", "disc_mask", "smoke_grid", "rigid_body", "rigid_body_from_mesh", "soft_body", "sphere_mesh", "superquadric_mesh", "tet_surface", "tet_volumes"]
