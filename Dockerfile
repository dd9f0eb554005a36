# syntax=docker/dockerfile:1
# A small static cudalint image: built against musl, nothing in the final image but the binary
# and the CA certificates registries are verified with.
#   docker build -t cudalint .
#   docker run --rm -v "$PWD:/work" -w /work cudalint scan image.tar --gpu H100,L4
# --on-device is not available in this image: a static musl binary cannot dlopen the host's
# libcuda (run the glibc build on the GPU node for that).
FROM rust:1.88-alpine AS build
RUN apk add --no-cache musl-dev ca-certificates
WORKDIR /src
COPY . .
RUN cargo build --release --locked --target x86_64-unknown-linux-musl \
 && cp target/x86_64-unknown-linux-musl/release/cudalint /cudalint \
 && strip /cudalint

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /cudalint /usr/local/bin/cudalint
# The layer cache needs a writable place; mount a volume here to keep it between runs.
ENV CUDALINT_CACHE_DIR=/cache HOME=/
ENTRYPOINT ["/usr/local/bin/cudalint"]
