"""The JVM programs' jars: declared in `jvm/pom.xml` (one Maven profile per classpath), resolved from Maven Central
into a cache outside the work tree on first use, verified, and reused offline afterwards.

    absent ──resolve (mvn, under a file lock)──▶ resolved ──verify (sha-256 of every jar)──▶ classpath
       ▲                                            │
       └──────── pom.xml changed / a jar altered ◀──┘

A cache entry is keyed by the profile and the pom's own hash, so editing the pom (a version bump) resolves
afresh and never mixes jars of two declarations. Maven was chosen over the Ivy jar inside pyspark because a pom is
the declaration every JVM developer reads, Maven checks Central's checksums while downloading, and the same file
can grow a profile per program (the broker now, other JVM peers later) without a second resolver.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from zkconsumer.embedded.process import EmbeddedError

POM = Path(__file__).with_name("jvm") / "pom.xml"
KAFKA_BROKER = "kafka-broker"
KAFKA_082 = "kafka-0.8.2"  # the original 0.8.2.2 release: its tools and its consumer
KAFKA4_BROKER = "kafka-4"  # Apache Kafka 4.x in KRaft mode, for the modern group protocols (embedded/kraft.py)
PROFILES = (KAFKA_BROKER, KAFKA_082, KAFKA4_BROKER)
_MANIFEST = "manifest.json"
_RESOLVE_TIMEOUT_S = 900


def cache_root() -> Path:
    """`$ZKCONSUMER_JVM_CACHE`, else `$XDG_CACHE_HOME/zkconsumer/jvm`, else `~/.cache/zkconsumer/jvm`."""
    override = os.environ.get("ZKCONSUMER_JVM_CACHE")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "zkconsumer" / "jvm"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class Classpath:
    profile: str
    directory: Path
    jars: tuple[Path, ...]

    def __str__(self) -> str:
        return ":".join(str(j) for j in self.jars)

    def version_of(self, artifact: str) -> str | None:
        """The version of `artifact` (a jar name prefix such as 'kafka_2.13') on this classpath."""
        for jar in self.jars:
            stem = jar.stem
            if stem.startswith(artifact + "-") and stem[len(artifact) + 1:][:1].isdigit():
                return stem[len(artifact) + 1:]
        return None


def _entry_dir(profile: str) -> Path:
    pom_hash = _sha256(POM)[:12]
    return cache_root() / f"{profile}-{pom_hash}"


def _verified(entry: Path) -> Classpath | None:
    """The entry's classpath if its manifest matches every jar on disk, else None."""
    try:
        manifest = json.loads((entry / _MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    jars = []
    for name, digest in sorted(manifest.get("jars", {}).items()):
        path = entry / "jars" / name
        if not path.is_file() or _sha256(path) != digest:
            return None
        jars.append(path)
    if not jars:
        return None
    return Classpath(manifest["profile"], entry, tuple(jars))


def _maven() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise EmbeddedError(
            "Maven (mvn) is not on PATH: install it (apt-get install maven); it resolves Apache Kafka from Maven "
            f"Central once into {cache_root()}"
        )
    return mvn


def _resolve_into(entry: Path, profile: str) -> None:
    """Resolve into a staging dir renamed into place only when complete, so a failed or killed download never
    leaves an entry that looks resolved."""
    staging = entry.with_name(entry.name + ".partial")
    try:
        _resolve_staged(staging, entry, profile)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone after the rename; leftovers of a failure


def _resolve_staged(staging: Path, entry: Path, profile: str) -> None:
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "jars").mkdir(parents=True)
    log = entry.parent / f"{entry.name}.resolve.log"
    argv = [
        _maven(), "-B", "--strict-checksums", "-f", str(POM), "-P", profile,
        "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={staging / 'jars'}",
    ]
    try:
        with open(log, "wb") as out:
            # cwd outside the package: Maven may create target/ next to where it runs.
            done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  cwd=entry.parent, timeout=_RESOLVE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise EmbeddedError(f"resolving {profile} from Maven Central took over {_RESOLVE_TIMEOUT_S} s (log: {log}): "
                            "check the network and retry") from None
    if done.returncode != 0:
        errors = [ln.strip() for ln in log.read_text(errors="replace").splitlines()
                  if "[ERROR]" in ln and ln.replace("[ERROR]", "").strip()][:2]
        raise EmbeddedError(f"could not resolve {profile} from Maven Central (mvn exit {done.returncode}; log: "
                            f"{log}): {' '.join(errors) or 'see the log'}; check the network and retry")
    jars = {p.name: _sha256(p) for p in sorted((staging / "jars").glob("*.jar"))}
    if not jars:
        raise EmbeddedError(f"resolving {profile} produced no jars (log: {log}); is the profile in {POM}?")
    (staging / _MANIFEST).write_text(json.dumps({"profile": profile, "pom": str(POM), "jars": jars}, indent=1))
    shutil.rmtree(entry, ignore_errors=True)
    staging.rename(entry)


def classpath(profile: str = KAFKA_BROKER) -> Classpath:
    """The verified classpath of `profile`, resolving it first if the cache has no valid entry.

    Concurrent callers (a test run and a CLI command) serialise on a lock file, so only one of them downloads."""
    entry = _entry_dir(profile)
    found = _verified(entry)
    if found is not None:
        return found
    entry.parent.mkdir(parents=True, exist_ok=True)
    with open(entry.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _verified(entry)  # another process may have finished while we waited
        if found is None:
            _resolve_into(entry, profile)
            found = _verified(entry)
    if found is None:
        raise EmbeddedError(f"the jars resolved into {entry} fail verification: delete it and retry")
    return found


def main(argv: list[str] | None = None) -> int:
    """`python -m zkconsumer.embedded.jvm [PROFILE ...]`: resolve (or verify) every profile, one line each; what
    `make test` and `make demo` run first, so a missing Maven or a failed download stops them in one line."""
    import sys

    for profile in (argv if argv is not None else sys.argv[1:]) or PROFILES:
        try:
            found = classpath(profile)
        except EmbeddedError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"{profile}: {len(found.jars)} jars in {found.directory}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
