# gantry's container image: a static binary on a minimal base with CA
# certificates. It runs as root, as GitHub requires of container actions.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/gantry-dev/gantry/entrypoint.Version=${VERSION}" \
      -o /out/gantry .

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/gantry /gantry
ENTRYPOINT ["/gantry"]
