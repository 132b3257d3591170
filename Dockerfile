# sizewatch on Debian 12: the same install script that CI and `make` use.
FROM debian:bookworm
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends ca-certificates make \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/sizewatch
COPY . .
RUN bash scripts/install.sh && rm -rf /var/lib/apt/lists/*
ENV PATH=/opt/sizewatch/.venv/bin:$PATH SERVE_HOST=0.0.0.0
# the dashboard (sizewatch serve: gunicorn, a worker per core): docker run -it -p 5000:5000 IMAGE
EXPOSE 5000
CMD ["make", "run"]
