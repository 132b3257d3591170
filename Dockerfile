# sizewatch's runtime image on Debian 12: what the dashboard, the list bot and the build workers run
# (compose.yaml starts them; PostgreSQL and Redis run in their own containers). The same install
# script as CI and `make`, with --runtime: no browser, chromedriver, wrk, public-inbox or [test]
# extras, no PostgreSQL/Redis servers (`make test` needs a machine or image with the full install).
#
#   docker build -t sizewatch .
#   docker run -it --init -p 5000:5000 -v sizewatch-cache:/var/cache/sizewatch \
#       --security-opt systempaths=unconfined --security-opt seccomp=unconfined \
#       --security-opt apparmor=unconfined sizewatch
#
# runs `make run` (the example series under five compilers, then the dashboard on port 5000).
# - builds run in bubblewrap, which cannot mount its /proc under the engine's default masked /proc
#   paths: hence systempaths=unconfined (and on Docker seccomp/apparmor=unconfined: its default
#   profiles refuse bwrap's user namespace and mounts). Without them the run stops at the sandbox
#   probe with that said.
# - the kernel trees, build dirs, objects and the sqlite store live under /var/cache/sizewatch: the
#   named volume keeps them between runs (without it every run starts again from nothing: the
#   first builds of each toolchain take minutes).
# - --init reaps the processes builds leave behind (compose.yaml: `init: true`).
# Behind a TLS-intercepting proxy, npm and pip need its CA: give the bundle as a build secret (it is
# never stored in a layer): docker build --secret id=ca_bundle,src=/etc/ssl/certs/ca-certificates.crt .

# the dashboard's chart libraries (web/package-lock.json): npm runs here only, the image gets the files
FROM debian:bookworm AS web-assets
WORKDIR /opt/sizewatch
COPY scripts/install.sh scripts/
COPY web/package.json web/package-lock.json web/
RUN --mount=type=secret,id=ca_bundle \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle NODE_EXTRA_CA_CERTS=/run/secrets/ca_bundle; fi; \
    bash scripts/install.sh --only web

FROM debian:bookworm
ENV SIZEWATCH_INSTALL=runtime
WORKDIR /opt/sizewatch
# the Debian packages first, in their own layer: a source edit does not redo them
COPY scripts/install.sh scripts/
RUN SIZEWATCH_EXTRA_APT=ca-certificates bash scripts/install.sh --only apt \
    && apt-get clean && rm -rf /var/lib/apt/lists/*
COPY . .
COPY --from=web-assets /opt/sizewatch/web/node_modules web/node_modules
RUN --mount=type=secret,id=ca_bundle \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle NODE_EXTRA_CA_CERTS=/run/secrets/ca_bundle; fi; \
    bash scripts/install.sh --only venv && rm -rf /root/.cache
ENV PATH=/opt/sizewatch/.venv/bin:$PATH SERVE_HOST=0.0.0.0 SIZEWATCH_CACHE=/var/cache/sizewatch
EXPOSE 5000
CMD ["make", "run"]
