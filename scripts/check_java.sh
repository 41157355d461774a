#!/usr/bin/env bash
# The embedded ZooKeeper and Kafka run on the JVM and Maven resolves Kafka's jars: fail early, in one line, if
# Java 17+ or Maven is missing.
set -euo pipefail
java_bin="${JAVA_HOME:+$JAVA_HOME/bin/}java"
if ! command -v "$java_bin" >/dev/null 2>&1; then
  echo "error: java not found: install Java 17 or newer (e.g. apt-get install openjdk-17-jre-headless)" >&2
  exit 1
fi
version=$("$java_bin" -version 2>&1 | sed -n 's/.*version "\([0-9]*\)\(\.\([0-9]*\)\)\{0,1\}.*/\1 \3/p' | head -1)
major=${version%% *}
if [ "$major" = "1" ]; then major=${version##* }; fi
if [ -z "$major" ] || [ "$major" -lt 17 ]; then
  echo "error: $java_bin is Java ${major:-unknown}; the embedded ZooKeeper and Kafka need Java 17 or newer" >&2
  exit 1
fi
if ! command -v mvn >/dev/null 2>&1; then
  echo "error: mvn not found: install Maven (e.g. apt-get install maven); it resolves Apache Kafka from Maven Central" >&2
  exit 1
fi
