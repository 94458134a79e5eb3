# syntax=docker/dockerfile:1
# Federation Autoscaler: one small non-root image with the single binary
# (broker, agent, adapter, pki, mocks are subcommands). docs/deploy.md.
#
#   docker build -t REGISTRY/federation-autoscaler:VERSION --build-arg VERSION=VERSION .
#   docker build --build-arg WITH_LIQOCTL=true ...   # also bake liqoctl v1.1.2 in
#
# Base images are pinned by tag; pin them by digest too in your registry
# mirror (FROM image:tag@sha256:...) when your policy asks for it.

FROM golang:1.26-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# Dependencies first: this layer is cached until go.mod/go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN go build -trimpath \
      -ldflags "-s -w -X github.com/federation-autoscaler/federation-autoscaler/cli.Version=${VERSION}" \
      -o /out/federation-autoscaler . && \
    /out/federation-autoscaler version
# liqoctl is not baked in unless asked for (--liqo-driver liqoctl can also
# use a liqoctl mounted from elsewhere with --liqoctl-path). It is built
# through the build module deploy/liqotest/liqoctlbin, which pins Liqo
# v1.1.2 and copies its replace directive: `go install …/liqoctl@v1.1.2`
# refuses a module whose go.mod has one. The same script builds the liqoctl
# the Liqo conformance suite runs.
ARG WITH_LIQOCTL=false
RUN mkdir -p /out/opt && \
    if [ "${WITH_LIQOCTL}" = "true" ]; then \
      FA_LIQOCTL_DIR=/out/opt bash deploy/liqotest/build-liqoctl.sh; \
    fi

FROM gcr.io/distroless/static-debian12:nonroot
# distroless/static carries CA certificates (/etc/ssl/certs) and tzdata, no
# shell; the binary is static (CGO_ENABLED=0).
COPY --from=build /out/federation-autoscaler /usr/local/bin/federation-autoscaler
COPY --from=build /out/opt/ /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/federation-autoscaler"]
CMD ["--help"]
