# Builds the pgoutbox binary into a small image. Used by compose/.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/pgoutbox ./cmd/pgoutbox

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/pgoutbox /usr/local/bin/pgoutbox
USER nonroot:nonroot
EXPOSE 9187
ENTRYPOINT ["/usr/local/bin/pgoutbox"]
CMD ["run"]
