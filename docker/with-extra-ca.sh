#!/bin/sh
# Run "$@" trusting, besides the image's CA bundle, the optional build secret `extra_ca` (a PEM
# bundle: your TLS-intercepting proxy's CA). Without the secret, or with an empty one, it only runs "$@".
# pip reads PIP_CERT, Python's urllib SSL_CERT_FILE. Maven (Java) reads a trust store: where keytool
# is on PATH, a copy of Java's default trust store plus the secret's certificates that the system's
# bundle ($SYSTEM_CA_BUNDLE, /etc/ssl/certs/ca-certificates.crt) lacks, passed in MAVEN_OPTS.
# Everything it writes is in a temporary folder, removed afterwards: nothing of it stays in a layer.
set -eu
secret=${EXTRA_CA_SECRET:-/run/secrets/extra_ca}  # EXTRA_CA_SECRET: for tests/test_compose.py
if [ ! -s "$secret" ]; then exec "$@"; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bundle=$work/bundle.pem
cat "$(python3 -c 'import pip._vendor.certifi as c; print(c.where())')" "$secret" > "$bundle"
echo "with-extra-ca: also trusting the extra_ca build secret ($(grep -c 'BEGIN CERTIFICATE' "$secret") certificates)" >&2

if command -v keytool >/dev/null 2>&1; then
  java_home=${JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v keytool)")")")}
  store=$work/truststore
  cp -L "$java_home/lib/security/cacerts" "$store"
  chmod u+w "$store"
  # The secret's certificates the system bundle does not have, one file each (a machine's whole
  # bundle is ~140 certificates; importing only the missing ones keeps this to a second or two).
  python3 - "$secret" "${SYSTEM_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}" "$work" <<'SPLIT'
import re
import sys
from pathlib import Path

PEM = re.compile(r"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", re.S)


def certificates(path):
    try:
        text = Path(path).read_text()
    except OSError:
        return []
    return [(re.sub(r"\s", "", body), block.group(0)) for block in PEM.finditer(text) for body in [block.group(1)]]


known = {body for body, _ in certificates(sys.argv[2])}
extra = [pem for body, pem in certificates(sys.argv[1]) if body not in known]
for number, pem in enumerate(extra):
    Path(sys.argv[3], f"extra-{number}.pem").write_text(pem + "\n")
SPLIT
  imported=0
  for pem in "$work"/extra-*.pem; do
    [ -e "$pem" ] || continue
    keytool -importcert -noprompt -keystore "$store" -storepass changeit -alias "extra-ca-$imported" \
      -file "$pem" >"$work/keytool.log" 2>&1 || { cat "$work/keytool.log" >&2; exit 1; }
    imported=$((imported + 1))
  done
  MAVEN_OPTS="${MAVEN_OPTS:-} -Djavax.net.ssl.trustStore=$store -Djavax.net.ssl.trustStorePassword=changeit"
  export MAVEN_OPTS
  echo "with-extra-ca: Java (Maven) also trusts the $imported of them the system bundle lacks" >&2
fi
PIP_CERT="$bundle" SSL_CERT_FILE="$bundle" "$@"
