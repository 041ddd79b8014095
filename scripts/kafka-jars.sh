#!/usr/bin/env bash
# Fetch Apache Kafka's broker and tool jars from Maven Central into a cache
# outside git. Prints nothing on success when the cache is already complete.
# Usage: scripts/kafka-jars.sh [version]   (default 3.9.1)
set -euo pipefail
KAFKA_VERSION="${1:-${KAFKA_VERSION:-3.9.1}}"
CACHE_DIR="${KSHARD_CACHE_DIR:-$HOME/.cache/kshard}"
DEST="$CACHE_DIR/kafka-$KAFKA_VERSION"
LIBS="$DEST/libs"
if [[ -f "$DEST/.complete" ]]; then
  exit 0
fi
mkdir -p "$DEST"
POM="$DEST/pom.xml"
cat >"$POM" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kshard.cache</groupId>
  <artifactId>kafka-libs</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-reload4j</artifactId>
      <version>1.7.36</version>
    </dependency>
  </dependencies>
</project>
POM
rm -rf "$LIBS"
mvn -B -q -f "$POM" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$LIBS"
ls "$LIBS"/kafka_2.13-"$KAFKA_VERSION".jar "$LIBS"/kafka-tools-"$KAFKA_VERSION".jar >/dev/null
touch "$DEST/.complete"
