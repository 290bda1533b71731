"""Hadoop's local file system as streamwarden configures it (``LocalFiles.java``): the same
permissions and link status as Hadoop's own, without starting ``chmod`` or ``readlink``."""

from __future__ import annotations

import os
import stat

import pytest

from streamwarden.engine.session import LOCAL_FILES

pytestmark = pytest.mark.spark


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture()
def local_fs(spark):
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    assert conf.get("fs.file.impl") == LOCAL_FILES["spark.hadoop.fs.file.impl"]
    return jvm, jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf)


def test_the_session_uses_it_for_both_hadoop_apis(spark, local_fs) -> None:
    jvm, fs = local_fs
    assert fs.getRawFileSystem().getClass().getName() == "streamwarden.jvm.LocalFiles$Raw"
    context = jvm.org.apache.hadoop.fs.FileContext.getLocalFSFileContext(spark._jsc.hadoopConfiguration())
    assert context.getDefaultFileSystem().getClass().getName() == "streamwarden.jvm.LocalFiles$Fs"


@pytest.mark.parametrize("mode", [0o700, 0o750, 0o755, 0o600, 0o644, 0o000, 0o777, 0o421])
def test_permissions_are_exactly_the_bits_asked_for(local_fs, tmp_path, mode) -> None:
    jvm, fs = local_fs
    target = tmp_path / "f"
    target.write_text("x")
    fs.setPermission(jvm.org.apache.hadoop.fs.Path(str(target)), jvm.org.apache.hadoop.fs.permission.FsPermission(mode))
    assert _mode(target) == mode


def test_created_folders_and_files_are_private_under_the_umask(local_fs, tmp_path) -> None:
    jvm, fs = local_fs
    Path, FsPermission = jvm.org.apache.hadoop.fs.Path, jvm.org.apache.hadoop.fs.permission.FsPermission
    folder = tmp_path / "a" / "b"
    assert fs.mkdirs(Path(str(folder)), FsPermission(0o700))
    out = fs.create(Path(str(folder / "part")), FsPermission(0o600), True, 4096, 1, 1 << 20, None)
    out.write(b"row")
    out.close()
    assert _mode(folder) == 0o700 and _mode(folder / "part") == 0o600
    assert (folder / "part").read_bytes() == b"row"


def test_link_status_as_hadoop_gives_it(local_fs, tmp_path) -> None:
    jvm, fs = local_fs
    Path = jvm.org.apache.hadoop.fs.Path
    plain, link = tmp_path / "plain", tmp_path / "link"
    plain.write_text("x")
    link.symlink_to(plain)
    status = fs.getRawFileSystem().getFileLinkStatus(Path(str(plain)))
    assert not status.isSymlink() and status.getLen() == 1
    linked = fs.getRawFileSystem().getFileLinkStatus(Path(str(link)))
    assert linked.isSymlink() and linked.getSymlink().toUri().getPath() == str(plain)
    with pytest.raises(Exception, match="FileNotFoundException"):
        fs.getRawFileSystem().getFileLinkStatus(Path(str(tmp_path / "missing")))
