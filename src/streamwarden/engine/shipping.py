"""The streamwarden package as a zip for Spark's executors.

On a cluster, Spark's Python workers run on machines where streamwarden need not be
installed, yet they must import it: Spark pickles the live-action data source *by
reference* to its module in this package. Without it, a query tied to a live action fails
on such a node with ``ModuleNotFoundError``. (The Security Shield, its SP encoder and the
continuous ``[ROWS n]`` window are JVM operators and ship as a jar: :mod:`streamwarden.engine.jvm`.)

:func:`package_zip` zips the package this process runs (found from its own
``__file__``, so an editable install ships the working tree as it is), and
:mod:`streamwarden.engine.session` adds the zip with ``SparkContext.addPyFile``: Spark
serves it from the driver and puts it on every Python worker's ``sys.path`` ahead of
site-packages. The zip holds sources only (no bytecode, which is tied to one Python
version), is deterministic (sorted entries, fixed timestamps and modes) and is named by
the hash of its content, so it is rebuilt only when the source changes, and two
versions never collide under one name in Spark's file server.

    >>> import tempfile, zipfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = package_zip(Path(folder))
    ...     shipped = zipfile.ZipFile(path).namelist()
    ...     cached = package_zip(Path(folder)) == path   # unchanged source: the same zip
    >>> "streamwarden/engine/shipping.py" in shipped, cached
    (True, True)
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import zipfile
from pathlib import Path

import streamwarden

#: Where zips are cached: ``$XDG_CACHE_HOME/streamwarden``, else ``~/.cache/streamwarden``.
CACHE_ENV = "XDG_CACHE_HOME"
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry: no build time leaks in
_SKIPPED_DIRS = {"__pycache__"}
_SKIPPED_SUFFIXES = (".pyc", ".pyo")


def package_root() -> Path:
    """The folder of the ``streamwarden`` package this process imported."""
    return Path(streamwarden.__file__).resolve().parent


def package_files(root: Path) -> list[Path]:
    """The files to ship, relative to ``root``, sorted: sources and package data, without
    bytecode, caches or hidden files (an editor's swap file is no part of the package)."""
    files = []
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if any(part in _SKIPPED_DIRS or part.startswith(".") for part in relative.parts):
            continue
        if path.is_file() and not path.is_symlink() and not path.name.endswith(_SKIPPED_SUFFIXES):
            files.append(relative)
    return sorted(files, key=lambda p: p.as_posix())


def package_zip(cache: Path | None = None) -> Path:
    """The zip of the package (built if its content changed), in ``cache`` (default:
    :func:`cache_dir`). Its name carries the content's hash."""
    root = package_root()
    files = package_files(root)
    contents = [(f"streamwarden/{f.as_posix()}", (root / f).read_bytes()) for f in files]
    digest = hashlib.sha256()
    for name, data in contents:
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    folder = cache if cache is not None else cache_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = folder / f"streamwarden-{streamwarden.__version__}-{digest.hexdigest()[:16]}.zip"
    if not target.is_file():
        write_archive(target, contents)
    return target


def write_archive(target: Path, contents: list[tuple[str, bytes]]) -> None:
    """A deterministic zip (or jar) of ``contents`` (name, bytes) at ``target``: entries with a
    fixed time and mode, so the same content is the same file. Written beside the target, then
    renamed: a concurrent start never sees half an archive."""
    handle, temporary = tempfile.mkstemp(prefix=".streamwarden-", suffix=target.suffix, dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in contents:
                entry = zipfile.ZipInfo(name, date_time=_EPOCH)
                entry.create_system = 3  # Unix, whatever the building machine
                entry.external_attr = (stat.S_IFREG | 0o644) << 16
                entry.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(entry, data)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def cache_dir() -> Path:
    """A folder for built zips that only this user can write: ``~/.cache/streamwarden``
    (0700), or a fresh private temporary folder when that cannot be had. What executors
    import comes from here, so a folder another user could write to is never used."""
    base = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache")
    folder = base / "streamwarden"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.lstat()
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
            if info.st_mode & 0o077:
                folder.chmod(0o700)
            return folder
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="streamwarden-zip-"))  # 0700, ours alone; rebuilt per run


__all__ = ["cache_dir", "package_files", "package_root", "package_zip", "write_archive"]
