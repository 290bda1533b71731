#!/usr/bin/env bash
# streamwarden's JVM side the Maven way (pom.xml, scripts/broker/pom.xml): its operators, Spark's
# Kafka connector and a Kafka broker, into build/. One line of progress; one clear line, exit 2,
# when Maven or its registry is missing (Maven's own words stay in build/maven.log).
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v mvn >/dev/null 2>&1; then
  echo "streamwarden builds its JVM side with Maven, and no 'mvn' was found: install Maven 3.8 or newer (e.g. 'apt-get install maven')" >&2
  exit 2
fi
mkdir -p build
log=build/maven.log
echo "building streamwarden's JVM operators, and fetching Spark's Kafka connector and a Kafka broker, with Maven (into build/; a minute the first time)"
rm -rf build/jvm/lib build/kafka/libs  # a version changed in a pom leaves no stale copy on a class path
if mvn -B -q package >"$log" 2>&1 && mvn -B -q -f scripts/broker/pom.xml package >>"$log" 2>&1; then
  exit 0
fi
if grep -qiE "could not (transfer|resolve)|offline mode|cannot access|unknown ?host|connection (refused|timed out)|failed to read artifact descriptor|non-resolvable" "$log"; then
  echo "Maven could not fetch streamwarden's JVM dependencies from its registry (Maven Central, or the mirror in ~/.m2/settings.xml): see $log" >&2
else
  echo "Maven could not build streamwarden's JVM side: see $log" >&2
fi
exit 2
