"""The report JVM's choice of JDK and its options (reports/jvm.py), on fake JDK folders: no JVM is started."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from reports import jvm


def fake_jdk(root: Path, name: str, version: str) -> Path:
    home = root / name
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    (home / "release").write_text(f'IMPLEMENTOR="test"\nJAVA_VERSION="{version}"\n')
    return home


@pytest.fixture
def jdks(tmp_path, monkeypatch):
    root = tmp_path / "jvm"
    fake_jdk(root, "java-17", "17.0.15")
    newest = fake_jdk(root, "temurin-25", "25.0.3")
    fake_jdk(root, "java-26-ea", "26-ea")  # a version Spark does not run on: never chosen
    monkeypatch.setattr(jvm, "_default_java_version", lambda: "17.0.15")
    return root, newest


def test_the_newest_supported_jdk_is_chosen_over_an_older_default(jdks):
    root, newest = jdks
    jdk = jvm.choose_jdk(env={}, roots=(str(root),))
    assert (jdk.home, jdk.major, jdk.version) == (str(newest), 25, "25.0.3")
    assert "newest found" in jdk.why and "17.0.15" in jdk.why


def test_java_home_set_by_the_user_is_respected(jdks, tmp_path):
    root, _ = jdks
    jdk = jvm.choose_jdk(env={"JAVA_HOME": str(root / "java-17")}, roots=(str(root),))
    assert (jdk.home, jdk.major) == (str(root / "java-17"), 17)


def test_interop_report_java_home_wins_and_must_be_a_jdk(jdks, tmp_path):
    root, _ = jdks
    env = {"INTEROP_REPORT_JAVA_HOME": str(root / "java-17"), "JAVA_HOME": str(root / "temurin-25")}
    assert jvm.choose_jdk(env=env, roots=(str(root),)).major == 17
    with pytest.raises(ValueError, match=r"INTEROP_REPORT_JAVA_HOME=.*nowhere: no bin/java there"):
        jvm.choose_jdk(env={"INTEROP_REPORT_JAVA_HOME": str(tmp_path / "nowhere")}, roots=(str(root),))


def test_without_a_newer_jdk_the_default_java_is_used(tmp_path, monkeypatch):
    root = tmp_path / "jvm"
    fake_jdk(root, "java-17", "17.0.15")
    monkeypatch.setattr(jvm, "_default_java_version", lambda: "17.0.15")
    jdk = jvm.choose_jdk(env={}, roots=(str(root),))
    assert jdk.home is None and jdk.major == 17


def test_options_use_the_cache_only_where_one_was_built_and_the_users_options_come_last(jdks, tmp_path):
    root, newest = jdks
    env = {"INTEROP_CACHE_DIR": str(tmp_path / "cache"), "INTEROP_REPORT_JAVA_OPTS": "-Xss4m -XX:+UseG1GC"}
    jdk = jvm.choose_jdk(env={}, roots=(str(root),))
    cache = jvm.cache_path(jdk, env)
    assert cache.parent == tmp_path / "cache" and "jdk25.0.3" in cache.name
    options = jvm.java_options(jdk, env)
    assert not any(o.startswith("-XX:AOTCache") for o in options)  # not built yet
    assert options[-2:] == ["-Xss4m", "-XX:+UseG1GC"]
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"x")
    assert f"-XX:AOTCache={cache}" in jvm.java_options(jdk, env)
    switched_off = jvm.java_options(jdk, {**env, "INTEROP_REPORT_AOT_CACHE": "off"})
    assert not any(o.startswith("-XX:AOTCache") for o in switched_off)


def test_the_cache_name_says_which_spark_installation_it_was_trained_on(jdks, tmp_path, monkeypatch):
    import pyspark

    root, _ = jdks
    jdk = jvm.choose_jdk(env={}, roots=(str(root),))
    env = {"INTEROP_CACHE_DIR": str(tmp_path)}
    here = jvm.cache_path(jdk, env)
    monkeypatch.setattr(pyspark, "__file__", str(tmp_path / "other-venv" / "pyspark" / "__init__.py"))
    elsewhere = jvm.cache_path(jdk, env)
    # the JVM refuses a cache trained with Spark's jars in another place: each checkout gets its own
    assert here != elsewhere and here.name.startswith(f"report-jdk25.0.3-spark{pyspark.__version__}-")


def test_a_jdk_before_25_has_no_cache_and_building_one_says_why(jdks, monkeypatch):
    root, _ = jdks
    jdk = jvm.choose_jdk(env={"JAVA_HOME": str(root / "java-17")}, roots=(str(root),))
    assert jvm.cache_path(jdk, {}) is None
    monkeypatch.setenv("JAVA_HOME", str(root / "java-17"))
    said: list[str] = []
    assert jvm.build_cache(log=said.append) == 0
    assert said == [f"report JVM cache: not built: JDK 17.0.15 at {root / 'java-17'} (JAVA_HOME) has no "
                    "ahead-of-time cache (JDK 25 or later has)"]


def test_major_versions_are_read_like_the_jdk_writes_them():
    versions = ("25.0.3", "17.0.15", "21", "1.8.0_402", "26-ea", "", None)
    assert [jvm._major(v) for v in versions] == [25, 17, 21, 8, 26, 0, 0]


def test_apply_points_spark_at_the_chosen_jdk(monkeypatch, jdks):
    _, newest = jdks
    # set, then removed: monkeypatch then restores the real value (or its absence) after apply() changed it
    monkeypatch.setenv("JAVA_HOME", "/before")
    monkeypatch.delenv("JAVA_HOME")
    jvm.apply(jvm.Jdk(str(newest), 25, "25.0.3", "test"))
    assert os.environ["JAVA_HOME"] == str(newest)


def test_the_jvm_start_up_output_goes_to_the_log_and_stderr_comes_back(tmp_path, capfd):
    """What a child started inside `_stderr_to` writes to its stderr (as the JVM's warnings) lands in the log file,
    for as long as the child lives; this process's own stderr is the terminal again afterwards."""
    import subprocess
    import sys

    from reports.job import _stderr_to

    log = tmp_path / "out" / "spark.log"
    with _stderr_to(log):
        child = subprocess.Popen([sys.executable, "-c", "import sys, time; sys.stderr.write('WARNING: early\\n'); "
                                  "sys.stderr.flush(); time.sleep(0.3); sys.stderr.write('WARNING: later\\n')"])
    child.wait(timeout=30)
    print("ours", file=sys.stderr, flush=True)
    assert log.read_text() == "WARNING: early\nWARNING: later\n"
    assert capfd.readouterr().err == "ours\n"
