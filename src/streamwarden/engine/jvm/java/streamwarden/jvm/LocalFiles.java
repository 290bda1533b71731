package streamwarden.jvm;

import java.io.File;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.local.LocalConfigKeys;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system, without a process per permission change or link lookup.
 *
 * <p>Without Hadoop's native library (PySpark ships none), {@link RawLocalFileSystem} runs
 * {@code chmod} as a program for the permissions of every file and folder it creates, and
 * {@code readlink} whenever a checkpoint renames a file: hundreds of processes per
 * micro-batch of a streaming query, forked from the JVM, which cost more CPU than many
 * micro-batches' own work. These classes do the same through {@code java.nio.file}: the
 * permissions are set to exactly the same bits (streamwarden's outputs and checkpoints stay
 * 0700 and 0600), a path that is a symbolic link is still resolved by Hadoop's own code.
 *
 * <p>{@code streamwarden.engine.session} names them for the {@code file} scheme, as
 * {@code fs.file.impl} ({@link FileSystem}) and {@code fs.AbstractFileSystem.file.impl}
 * ({@link Fs}, what Spark's checkpoint manager uses).
 */
public final class LocalFiles {
  private LocalFiles() {}

  /** The raw file system: Hadoop's, with {@code setPermission} and link status through NIO. */
  public static class Raw extends RawLocalFileSystem {
    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      Files.setPosixFilePermissions(pathToFile(p).toPath(), posix(permission.toShort()));
    }

    @Override
    public FileStatus getFileLinkStatus(Path p) throws IOException {
      File file = pathToFile(p);
      if (Files.isSymbolicLink(file.toPath())) {
        return super.getFileLinkStatus(p);  // rare: Hadoop's own resolution
      }
      return getFileStatus(p);  // not a link: what Hadoop returns after readlink printed nothing
    }
  }

  /** {@code fs.file.impl}: the checksummed local file system over {@link Raw}. */
  public static final class FileSystem extends LocalFileSystem {
    public FileSystem() {
      super(new Raw());
    }
  }

  /** {@code fs.AbstractFileSystem.file.impl}: the {@code FileContext} side, as Hadoop's {@code LocalFs}. */
  public static final class Fs extends ChecksumFs {
    public Fs(URI uri, Configuration conf) throws IOException, URISyntaxException {
      super(new RawFs(uri, conf));
    }
  }

  /** As Hadoop's {@code RawLocalFs}, over {@link Raw}. */
  static final class RawFs extends DelegateToFileSystem {
    RawFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
      super(uri, new Raw(), conf, "file", false);
    }

    @Override
    public int getUriDefaultPort() {
      return -1;
    }

    @Override
    @SuppressWarnings("deprecation")
    public FsServerDefaults getServerDefaults() throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    public FsServerDefaults getServerDefaults(Path f) throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    public boolean isValidName(String src) {
      return true;  // as RawLocalFs: any local path
    }
  }

  /** The POSIX permissions of the low nine bits of {@code mode} (owner, group, others). */
  static Set<PosixFilePermission> posix(int mode) {
    PosixFilePermission[] bits = {
      PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
      PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
      PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
    };
    Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
    for (int i = 0; i < bits.length; i++) {
      if ((mode & (1 << i)) != 0) {
        set.add(bits[i]);
      }
    }
    return set;
  }
}
