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

# gdb: the cluster suite prints every thread's stack of a broker that does
# not become ready, so a start-up hang in CI says where it hangs.
if ! command -v gdb >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq gdb >/dev/null
fi

# ss (iproute2): the compat suite reads the broker's socket options with it.
if ! command -v ss >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq iproute2 >/dev/null
fi

# Go builds franz-go's test binary: the toolchain in /usr/local/go if it is
# not on PATH, else Debian's.
if ! command -v go >/dev/null 2>&1; then
  if [[ -x /usr/local/go/bin/go ]]; then
    export PATH="$PATH:/usr/local/go/bin"
  else
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq golang-go >/dev/null
  fi
fi

for tool in java mvn cargo python3 go; do
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
        -z "$(find tests/compat/java/src -name '*.java' -newer "$out/classes/kshard/compat/Client.class")" ]]; then
    continue
  fi
  mvn -B -q -o -f tests/compat/java/pom.xml -Dkafka.version="$v" compile dependency:copy-dependencies 2>/dev/null ||
    mvn -B -q -f tests/compat/java/pom.xml -Dkafka.version="$v" compile dependency:copy-dependencies
done

# franz-go's own pkg/kgo integration tests, compiled once into a test binary
# (tests/compat/test_franz_go.py runs it against the broker under test). The
# module source is copied out of Go's read-only module cache because some
# tests read the package's own source files.
FRANZ_GO_VERSION="${FRANZ_GO_VERSION:-1.22.3}"
franz_dir="$HOME/.cache/kshard/franz-go-$FRANZ_GO_VERSION"
if [[ ! -x "$franz_dir/kgo.test" ]]; then
  mod_dir="$(GOFLAGS=-mod=mod go mod download -json "github.com/twmb/franz-go@v$FRANZ_GO_VERSION" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  rm -rf "$franz_dir.tmp"
  cp -r "$mod_dir" "$franz_dir.tmp"
  chmod -R u+w "$franz_dir.tmp"
  (cd "$franz_dir.tmp/pkg/kgo" && GOFLAGS=-mod=mod go test -c -o ../../kgo.test .)
  rm -rf "$franz_dir"
  mv "$franz_dir.tmp" "$franz_dir"
fi

cargo build --release --bins
