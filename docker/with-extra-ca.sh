#!/bin/sh
# Run "$@" trusting, besides the image's CA bundle, the optional build secret `extra_ca` (a PEM
# bundle: your TLS-intercepting proxy's CA). Without the secret, or with an empty one, it only runs "$@".
# pip reads PIP_CERT, Python's urllib SSL_CERT_FILE.
set -eu
secret=${EXTRA_CA_SECRET:-/run/secrets/extra_ca}  # EXTRA_CA_SECRET: for tests/test_compose.py
if [ ! -s "$secret" ]; then exec "$@"; fi
bundle=$(mktemp)
trap 'rm -f "$bundle"' EXIT
cat "$(python3 -c 'import pip._vendor.certifi as c; print(c.where())')" "$secret" > "$bundle"
echo "with-extra-ca: also trusting the extra_ca build secret ($(grep -c 'BEGIN CERTIFICATE' "$secret") certificates)" >&2
PIP_CERT="$bundle" SSL_CERT_FILE="$bundle" "$@"
