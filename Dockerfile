# syntax=docker/dockerfile:1

# The service and the load driver, built from the module root into one small
# image: `seckill` is the entrypoint, `loadtest` runs with
# `docker compose --profile loadtest run --rm loadtest`.

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a change to the code does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Static binaries: the runtime image's C library (Alpine's musl) is not the
# builder's glibc.
ENV CGO_ENABLED=0
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /seckill . && \
    go build -trimpath -ldflags="-s -w" -o /loadtest ./loadtest

# Alpine rather than scratch or distroless: its busybox wget runs the health
# checks that docker-compose.yml declares, at about 8 MB.
FROM alpine:3.22 AS runtime
RUN apk add --no-cache ca-certificates tzdata && \
    addgroup -S -g 10001 seckill && \
    adduser -S -D -H -u 10001 -G seckill seckill
COPY --from=build /seckill /loadtest /usr/local/bin/
USER 10001:10001
# Inside a container the service must listen on every interface.
ENV SECKILL_ADDR=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["seckill"]
