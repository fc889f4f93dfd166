# Container image of sglang-log-exporter: a glibc binary on distroless/cc, non-root, ~30 MB.
#
#   docker build --build-arg REVISION=$(git rev-parse --short=12 HEAD) -t sglang-log-exporter:0.1.0 .
#   docker run --rm -v /var/log/sglang:/logs:ro -p 8771:8771 sglang-log-exporter:0.1.0 /logs/decode.log
#
# No image is published. For Kubernetes, tag it with your registry and push it, then name it in
# deploy/kubernetes/kustomization.yaml (`images:`):
#   docker build --build-arg REVISION=$(git rev-parse --short=12 HEAD) \
#     -t registry.example.com/team/sglang-log-exporter:0.1.0 .
#   docker push registry.example.com/team/sglang-log-exporter:0.1.0
#
# GPU metrics (NVML) come through the NVIDIA container runtime, which mounts the host's
# libnvidia-ml.so.1 into the container:
#   docker run --gpus all -e NVIDIA_DRIVER_CAPABILITIES=utility \
#     -v /proc:/host/proc:ro -v /var/log/sglang:/logs:ro -p 8771:8771 \
#     sglang-log-exporter:0.1.0 --gpu.proc-root=/host/proc /logs/decode.log
# (or --runtime=nvidia -e NVIDIA_VISIBLE_DEVICES=all). NVML names host PIDs: --gpu.proc-root
# points at the host's /proc mounted read-only (or run with --pid=host and keep /proc).
#
# Why distroless/cc and a glibc binary, not a static musl one on scratch: NVML is loaded at run
# time (dlopen) from the driver's libnvidia-ml.so.1, a glibc library; a static binary cannot load
# it. distroless/cc-debian12 is glibc and libgcc with no shell or package manager, and matches
# the builder's Debian 12 glibc. Not in the image: journalctl, so --journal-unit needs the
# Debian package (or a journalctl pipe into `-` from the host).
ARG RUST_IMAGE=docker.io/library/rust:1-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${RUST_IMAGE} AS build
WORKDIR /src
# The git commit for --version and build_info (the build context has no .git).
ARG REVISION=unknown
ENV SGLANG_LOG_EXPORTER_REVISION=${REVISION}
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
COPY patterns ./patterns
COPY benches ./benches
RUN cargo build --release --locked --bin sglang-log-exporter \
 && strip target/release/sglang-log-exporter

FROM ${RUNTIME_IMAGE}
ARG REVISION=unknown
LABEL org.opencontainers.image.title="sglang-log-exporter" \
      org.opencontainers.image.description="Prometheus metrics for SGLang servers, read from their logs" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /src/target/release/sglang-log-exporter /usr/bin/sglang-log-exporter
# The embedded pattern file, also on disk as a starting point for --patterns.
COPY patterns/sglang.yaml /usr/share/sglang-log-exporter/patterns/sglang.yaml
# distroless' nonroot user, numeric so that Kubernetes' runAsNonRoot can check it.
USER 65532:65532
EXPOSE 8771
ENTRYPOINT ["/usr/bin/sglang-log-exporter"]
