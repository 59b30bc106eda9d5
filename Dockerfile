# gantry's container image: a static binary on a minimal base with CA
# certificates, and busybox for a shell: GitLab's Docker executor runs a
# job's script through sh. It runs as root, as GitHub requires of container
# actions. `make image` assembles the same layout without a Docker engine.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/gantry-dev/gantry/entrypoint.Version=${VERSION} -X helm.sh/helm/v4/internal/version.version=v4.3.1" \
      -o /out/gantry .

FROM busybox:1.37.0-musl AS shell

FROM gcr.io/distroless/static-debian12
COPY --from=shell /bin/busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
COPY --from=build /out/gantry /gantry
ENTRYPOINT ["/gantry"]
