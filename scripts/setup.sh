#!/usr/bin/env bash
# Idempotent install of everything the test suite needs: kcat, the Python
# clients, Apache Kafka's jars (reference broker and tools), the Java
# compatibility client for two kafka-clients versions, and the release build.
set -euo pipefail
cd "$(dirname "$0")/.."

KAFKA_VERSION="${KAFKA_VERSION:-3.9.1}"
JAVA_CLIENT_VERSIONS="${KSHARD_JAVA_CLIENT_VERSIONS:-3.9.1 4.4.0}"
SUDO=""
if [[ "$(id -u)" != 0 ]]; then SUDO="sudo"; fi

if ! command -v kcat >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq kcat >/dev/null
fi

for tool in java mvn cargo python3; do
  command -v "$tool" >/dev/null || { echo "setup: $tool is required" >&2; exit 1; }
done

# kafka-python 2.x never writes acks=0 produce requests to the socket (the
# records are lost with no error); 3.0.12 sends them, so it is pinned.
python3 -m pip install -q --disable-pip-version-check \
  "pytest>=8" "pytest-timeout==2.4.0" "pytest-rerunfailures==16.7" \
  "confluent-kafka==2.16.1" "kafka-python==3.0.12" \
  "python-snappy==0.7.3" "cramjam==2.14.0" "lz4==4.4.5" "zstandard==0.25.0" "kazoo==2.11.0"

bash scripts/kafka-jars.sh "$KAFKA_VERSION"

# Offline first (cache in ~/.m2), online when something is missing.
for v in $JAVA_CLIENT_VERSIONS; do
  out="tests/compat/java/target/kc-$v"
  if [[ -f "$out/classes/kshard/compat/Client.class" && -d "$out/libs" && \
        "$out/classes/kshard/compat/Client.class" -nt tests/compat/java/src/main/java/kshard/compat/Client.java ]]; then
    continue
  fi
  mvn -B -q -o -f tests/compat/java/pom.xml -Dkafka.version="$v" compile dependency:copy-dependencies 2>/dev/null ||
    mvn -B -q -f tests/compat/java/pom.xml -Dkafka.version="$v" compile dependency:copy-dependencies
done

cargo build --release --bins
