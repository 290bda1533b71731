"""Spark's settings from defaults, environment and command line, and the package's zip for
executors; no Spark is started here (``tests/test_cluster.py`` runs them on a cluster)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from streamwarden.cli.main import main
from streamwarden.engine import shipping
from streamwarden.engine.session import CONF_ENV, MASTER_ENV, spark_settings
from streamwarden.errors import UsageError


def test_command_line_wins_over_environment_which_wins_over_defaults() -> None:
    environ = {MASTER_ENV: "local[3]", CONF_ENV: "spark.executor.memory=2g\n\nspark.ui.enabled=true\n"}
    from_env = spark_settings(None, [], environ)
    assert from_env.master == "local[3]"
    assert (from_env.conf["spark.executor.memory"], from_env.conf["spark.ui.enabled"]) == ("2g", "true")
    assert from_env.conf["spark.sql.shuffle.partitions"] == from_env.conf["spark.default.parallelism"] == "3"
    chosen = spark_settings("local[5]", ["spark.executor.memory=4g", "spark.sql.shuffle.partitions=7"], environ)
    assert chosen.master == "local[5]"
    assert chosen.conf["spark.executor.memory"] == "4g"
    assert (chosen.conf["spark.sql.shuffle.partitions"], chosen.conf["spark.default.parallelism"]) == ("7", "5")
    default = spark_settings(None, [], {})
    assert default.master == "local[2]" and default.conf["spark.ui.enabled"] == "false"
    assert default.conf["spark.sql.session.timeZone"] == "UTC"


def test_partitions_follow_the_master() -> None:
    def partitions(master: str) -> str | None:
        return spark_settings(master, [], {}).conf.get("spark.sql.shuffle.partitions")

    assert partitions("local[4]") == "4" and partitions("local") == "1"
    assert partitions("local-cluster[3,2,1024]") == "6"
    assert partitions("local[*]") == str(__import__("os").cpu_count())
    assert partitions("spark://head:7077") is None and partitions("yarn") is None  # Spark's own defaults
    assert spark_settings("yarn", ["spark.sql.shuffle.partitions=64"], {}).conf["spark.sql.shuffle.partitions"] == "64"


def test_only_masters_outside_this_process_ship_the_package() -> None:
    assert not spark_settings("local[*]", [], {}).ships_package
    assert spark_settings("local-cluster[2,1,1024]", [], {}).ships_package
    assert spark_settings("k8s://https://api:6443", [], {}).ships_package


@pytest.mark.parametrize("entries, message", [
    (["spark.ui.enabled"], "--conf expects KEY=VALUE, got 'spark.ui.enabled'"),
    (["=true"], "--conf expects KEY=VALUE, got '=true'"),
    (["ui.enabled=true"], "--conf 'ui.enabled': a Spark setting's key starts with 'spark.'"),
    (["spark.master=yarn"], "--conf spark.master: give the master with --master"),
    (["spark.sql.session.timeZone=Europe/Paris"], "is refused: streamwarden keeps it UTC"),
    (["spark.hadoop.fs.permissions.umask-mode=022"], "is refused: streamwarden keeps it 077"),
])
def test_malformed_or_refused_settings_are_one_clear_line(entries: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("(", r"\(")) as error:
        spark_settings(None, entries, {})
    assert "\n" not in str(error.value)


def test_the_protected_settings_may_be_restated_unchanged() -> None:
    conf = spark_settings(None, ["spark.sql.session.timeZone=UTC", "spark.hadoop.fs.permissions.umask-mode=077"],
                          {}).conf
    assert conf["spark.sql.session.timeZone"] == "UTC"


def test_the_environment_is_checked_like_the_command_line() -> None:
    with pytest.raises(UsageError, match=f"{CONF_ENV} .*keeps it UTC"):
        spark_settings(None, [], {CONF_ENV: "spark.sql.session.timeZone=PST"})
    with pytest.raises(UsageError, match=f"{MASTER_ENV} 'mesos://x' is not a Spark master URL"):
        spark_settings(None, [], {MASTER_ENV: "mesos://x"})


@pytest.mark.parametrize("argv, message", [
    (["--conf", "spark.executor.memory"], "error: --conf expects KEY=VALUE, got 'spark.executor.memory'"),
    (["--conf", "spark.sql.session.timeZone=Asia/Tokyo"], "error: --conf spark.sql.session.timeZone=Asia/Tokyo is "
                                                          "refused"),
    (["--master", "local[two]"], "error: --master 'local[two]' is not a Spark master URL"),
])
@pytest.mark.parametrize("command", [
    ["replay", "--catalog", "examples/drill.yaml", "--user", "paul", "--query", "SELECT SID FROM Position",
     "--input", "Position=nowhere", "--output", "out.jsonl"],
    ["run", "--catalog", "examples/drill.yaml", "--user", "paul", "--query", "SELECT SID FROM Position",
     "--input", "Position=nowhere", "--sink", "out"],
    ["network", "replay", "--catalog", "examples/drill.yaml", "--queries", "q.yaml", "--access", "a.jsonl",
     "--output-dir", "out"],
    ["demo"],
    ["explain", "--catalog", "examples/drill.yaml", "--user", "paul", "--query", "SELECT SID FROM Position"],
])
def test_the_cli_reports_a_bad_setting_in_one_line_with_exit_2(command: list[str], argv: list[str], message: str,
                                                               capsys, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # nothing may be written: the setting is refused first
    assert main([*command, *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []


# -- the package's zip ---------------------------------------------------------------------------
def fake_package(root: Path, text: str) -> Path:
    (root / "engine" / "__pycache__").mkdir(parents=True)
    (root / "__init__.py").write_text('__version__ = "0"\n')
    (root / "engine" / "mod.py").write_text(text)
    (root / "engine" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"bytecode")
    (root / ".mod.py.swp").write_text("an editor's")
    return root


def test_the_zip_is_deterministic_cached_and_rebuilt_when_the_source_changes(tmp_path: Path, monkeypatch) -> None:
    root = fake_package(tmp_path / "streamwarden", "x = 1\n")
    monkeypatch.setattr(shipping, "package_root", lambda: root)
    first = shipping.package_zip(tmp_path / "a")
    assert zipfile.ZipFile(first).namelist() == ["streamwarden/__init__.py", "streamwarden/engine/mod.py"]
    again = shipping.package_zip(tmp_path / "b")  # built anew elsewhere: the same bytes
    assert again.name == first.name and again.read_bytes() == first.read_bytes()
    mtime = first.stat().st_mtime_ns
    assert shipping.package_zip(tmp_path / "a") == first and first.stat().st_mtime_ns == mtime  # cached
    (root / "engine" / "mod.py").write_text("x = 2\n")
    changed = shipping.package_zip(tmp_path / "a")
    assert changed != first and zipfile.ZipFile(changed).read("streamwarden/engine/mod.py") == b"x = 2\n"


def test_the_cache_is_private(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (tmp_path / "streamwarden").mkdir(mode=0o755)
    folder = shipping.cache_dir()
    assert folder == tmp_path / "streamwarden" and folder.stat().st_mode & 0o777 == 0o700
