# sizewatch on Debian 12: the same install script that CI and `make` use.
FROM debian:bookworm
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends ca-certificates make \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/sizewatch
COPY . .
RUN bash scripts/install.sh && rm -rf /var/lib/apt/lists/*
ENV PATH=/opt/sizewatch/.venv/bin:$PATH
CMD ["make", "run"]
