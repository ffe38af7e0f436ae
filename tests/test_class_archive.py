"""harness/peers/class_archive.py: naming, when its options apply, and how it is made (run_once stands in for a
broker: the JVM's part is exercised by `make products` and every broker start after them)."""

from __future__ import annotations

from harness.peers.class_archive import ClassArchive


def test_no_options_until_the_archive_is_made_then_the_file(tmp_path):
    archive = ClassArchive(tmp_path, "artemis", "java", ("/opt/artemis", "-Xmx256m"))
    assert archive.options() == []
    said = []

    def run_once(extra):
        (flag,) = extra
        assert flag.startswith("-XX:ArchiveClassesAtExit=")
        partial = flag.split("=", 1)[1]
        assert partial != str(archive.path)  # written aside, renamed when whole
        with open(partial, "wb") as out:
            out.write(b"archive")

    archive.make(run_once, said.append)
    assert archive.path.read_bytes() == b"archive"
    assert archive.options() == [f"-XX:SharedArchiveFile={archive.path}"]
    assert said == [f"class archive: {archive.path} (0 MB)"]
    archive.make(lambda extra: (_ for _ in ()).throw(AssertionError("made twice")), said.append)
    assert [p.name for p in tmp_path.iterdir()] == [archive.path.name]


def test_another_install_jdk_or_options_is_another_archive(tmp_path):
    names = {ClassArchive(tmp_path, "artemis", java, key).path.name
             for java, key in (("java", ("/a", "-Xmx1g")), ("java", ("/b", "-Xmx1g")), ("java", ("/a", "-Xmx2g")),
                               ("/nonexistent/java", ("/a", "-Xmx1g")))}
    assert len(names) == 4


def test_a_broker_that_fails_or_writes_nothing_leaves_no_archive_and_says_so(tmp_path):
    archive = ClassArchive(tmp_path, "activemq-classic", "java", ("/x",))
    said = []

    def fails(extra):
        open(extra[0].split("=", 1)[1], "wb").write(b"half")
        raise RuntimeError("broker did not start\nsecond line")

    archive.make(fails, said.append)
    archive.make(lambda extra: None, said.append)
    assert archive.options() == [] and list(tmp_path.iterdir()) == []
    assert said == ["class archive: not made (RuntimeError: broker did not start second line); brokers start "
                    "without it", "class archive: the broker exited without writing one; brokers start without it"]
