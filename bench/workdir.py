"""A scratch directory for one experiment's inputs and runs, removed afterwards."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A fresh temporary directory named ``prefix…``, deleted on leaving (also on an error)."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield workdir
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
