# capgate's image: one static binary at /usr/local/bin/capgate, run as a
# non-root user (65532, as deploy/kubernetes' runAsUser) in a distroless
# base (CA certificates and tzdata, no shell, no libc). The manifests of
# deploy/kubernetes run it with `args: [coordinator|gateway, --config, …]`.
#
#   docker build -t capgate:latest .
#   docker build --build-arg VERSION=v1.2.3 --build-arg COMMIT=$(git rev-parse HEAD) -t capgate:v1.2.3 .
#
# COMMIT is the commit `capgate version` and capgate_build_info report:
# .dockerignore leaves .git out, so the build cannot read it ("unknown"
# without the argument).
#
# CGO_ENABLED=0 is what makes it run here: a plain `go build` on a machine
# with a C compiler links the C library dynamically, and such a binary
# fails in a distroless or scratch image with "no such file or directory"
# (the loader it names is not there). deploy/dockerfile_test.go builds the
# binary with this file's command and checks it is static, and holds the
# Go version, the user and the entrypoint to go.mod and the manifests.
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
ARG COMMIT=""
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/capgate/capgate/internal/buildinfo.version=${VERSION} -X github.com/capgate/capgate/internal/buildinfo.commit=${COMMIT}" -o /out/capgate ./cmd/capgate \
 && mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/capgate /usr/local/bin/capgate
# The working directory, writable by the user: a badger coordinator's
# default data_dir (./capgate-data/coordinator) lands here — mount a volume
# on it to keep the state.
COPY --from=build --chown=65532:65532 /out/state /var/lib/capgate
WORKDIR /var/lib/capgate
USER 65532:65532
# coordinator.listen, gateway.listen, gateway.kafka_listen and its fetch
# lanes (the next 3 ports), at their default ports. Inside a container
# listen on every interface: CAPGATE_COORDINATOR_LISTEN=0.0.0.0:7070,
# CAPGATE_GATEWAY_LISTEN=0.0.0.0:8080 (the defaults are loopback).
EXPOSE 7070 8080 9093 9094 9095 9096
ENTRYPOINT ["/usr/local/bin/capgate"]
CMD ["--help"]
