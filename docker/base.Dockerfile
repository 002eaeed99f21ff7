# The lab image's base where no container registry answers (scripts/docker-engine.sh builds it):
# a `debootstrap --variant=minbase bookworm` root imported as MINBASE, plus Debian's Python 3.11,
# laid out like the official python:*-slim images the Dockerfile expects: `python`/`python3` in
# /usr/local/bin, and `pip install` allowed (into /usr/local, Debian's site directory for it).
ARG MINBASE
FROM ${MINBASE}
ENV LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN set -eux; \
    apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 python3-pip python3-venv ca-certificates; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb; \
    rm -f /usr/lib/python3*/EXTERNALLY-MANAGED; \
    ln -s /usr/bin/python3 /usr/local/bin/python3; \
    ln -s /usr/bin/python3 /usr/local/bin/python; \
    ln -s /usr/bin/pip3 /usr/local/bin/pip
CMD ["python3"]
