"""Atomic writes for every output the package makes (videos, frames, reports, plots).

A file is written under a temporary name in its own folder and renamed over the target when complete:
`os.replace` within one filesystem is atomic on POSIX, so a reader, or a run killed mid-write, sees
either the old file or the complete new one, never a partial write. (Checkpoints add fsyncs of their
own: `fit/checkpoint.py`.)
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Iterator


def temporary_sibling(path: Path, tag: str = "tmp") -> Path:
    """A fresh hidden name in `path`'s folder that keeps its suffix (ffmpeg picks the container by it).

    Args:
        path: the target file's path.
        tag: a word put before the suffix (".name.1a2b3c4d.tmp.mp4").

    Returns:
        A path in `path`'s folder that does not name `path` (random 8 hex digits in it).
    """
    return path.with_name(f".{path.stem}.{secrets.token_hex(4)}.{tag}{path.suffix}")


@contextlib.contextmanager
def atomic_file(path) -> Iterator[Path]:
    """Yield a temporary path to write; on success rename it to `path`, on any failure delete it.

    Args:
        path: the target file (str or Path); its folder is created when missing.

    Yields:
        The temporary Path to write to, in `path`'s folder.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = temporary_sibling(path)
    try:
        yield temporary
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


__all__ = ["atomic_file", "temporary_sibling"]
