#!/usr/bin/env bash
# Spark 4 runs on Java 17 or newer, and streamwarden compiles its JVM operators with the JDK's javac;
# say so clearly instead of failing deep inside py4j.
set -euo pipefail

# The JDK's tool $1: JAVA_HOME's when it has one, else the PATH's.
jdk_tool() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/$1" ]; then echo "$JAVA_HOME/bin/$1"; else echo "$1"; fi
}

java_bin=$(jdk_tool java)
if ! command -v "$java_bin" >/dev/null 2>&1; then
  echo "streamwarden needs Java 17 or newer (Spark 4), and no 'java' was found." >&2
  echo "Install one, e.g. 'apt-get install openjdk-17-jdk-headless', or set JAVA_HOME." >&2
  exit 1
fi
version=$("$java_bin" -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')
major=${version%%.*}
if [ "$major" = "1" ]; then major=$(echo "$version" | cut -d. -f2); fi
if ! [ "$major" -ge 17 ] 2>/dev/null; then
  echo "streamwarden needs Java 17 or newer (Spark 4); found Java $version at $(command -v "$java_bin")." >&2
  echo "Install openjdk-17 or newer and put it first on PATH or in JAVA_HOME." >&2
  exit 1
fi
if ! command -v "$(jdk_tool javac)" >/dev/null 2>&1; then
  echo "streamwarden compiles its JVM operators with javac, and no 'javac' was found (a JRE only?)." >&2
  echo "Install a JDK 17 or newer, e.g. 'apt-get install openjdk-17-jdk-headless', or set JAVA_HOME." >&2
  exit 1
fi
