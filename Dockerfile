# meshdns: one static-enough binary on distroless. Build with the commit embedded:
#   docker build --build-arg MESHDNS_GIT_COMMIT=$(git rev-parse --short=12 HEAD) -t meshdns .
# (podman/buildah read this file as it is.) docs/deploy.md says what was verified of it.

# Build stage: the official Rust image of the toolchain the project is built and tested with.
ARG RUST_VERSION=1.95
FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
ARG MESHDNS_GIT_COMMIT=unknown
ENV MESHDNS_GIT_COMMIT=${MESHDNS_GIT_COMMIT}
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin meshdns \
    && cp target/release/meshdns /meshdns

# Runtime stage: glibc, libgcc and CA certificates, nothing else (no shell, no package
# manager). The binary needs only libc, libm and libgcc_s (a test checks its ELF NEEDED list).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /meshdns /usr/local/bin/meshdns
# distroless's nonroot user; the manifests also run it with a read-only root filesystem, with
# /var/lib/meshdns (pkarr packets) on a volume.
USER 65532:65532
EXPOSE 1053/udp 1053/tcp 8080/tcp
ENTRYPOINT ["/usr/local/bin/meshdns"]
CMD ["serve", "--config", "/etc/meshdns/config.yaml"]
