"""Fits of the renderer alone, without physics: a mesh's texture from pictures (`texture`) and its shape from
silhouettes (`shape`)."""
