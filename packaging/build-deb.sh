#!/usr/bin/env bash
# Builds the Debian package: target/debian/sglang-log-exporter_<version>-1_<arch>.deb (its path
# is the last line printed on stdout; everything else goes to stderr). Its settings are
# [package.metadata.deb] in Cargo.toml.
#
# What it needs, checked first:
#   - Rust 1.88 or newer (cargo): named when missing (rustup installs it);
#   - dpkg-shlibdeps (Debian package dpkg-dev: the package's library dependencies) and strip
#     (binutils): named, with the apt-get line, when missing;
#   - cargo-deb: installed when missing, at the version .ci/run pins
#     (`cargo install cargo-deb --locked --version 3.8.0`, about 2 minutes on 2 cores, once,
#     into ~/.cargo/bin); if that fails, the command is printed and the script exits 1.
#
# The release binary is built first, then it writes its own man pages and shell completions
# (`sglang-log-exporter generate`, hidden from --help), then `cargo deb --no-build` packs it all.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo_deb_version=3.8.0
say() { echo "build-deb: $*" >&2; }

if ! command -v cargo >/dev/null; then
  say "cargo is missing: install Rust 1.88 or newer (rustup), then run this again"
  exit 1
fi
missing=()
command -v dpkg-shlibdeps >/dev/null || missing+=(dpkg-dev)
command -v strip >/dev/null || missing+=(binutils)
if ((${#missing[@]})); then
  say "missing ${missing[*]}: sudo apt-get install ${missing[*]}"
  exit 1
fi
if ! cargo deb --version >/dev/null 2>&1; then
  install=(cargo install cargo-deb --locked --version "$cargo_deb_version")
  say "cargo-deb is missing; installing it: ${install[*]}"
  if ! "${install[@]}" >&2 || ! cargo deb --version >/dev/null 2>&1; then
    say "could not install cargo-deb; install it with: ${install[*]}"
    exit 1
  fi
fi

cargo build --release --locked >&2
bin=target/release/sglang-log-exporter
rm -rf target/deb-assets
"$bin" generate man target/deb-assets/man >/dev/null
gzip -9n target/deb-assets/man/*.1
"$bin" generate completions target/deb-assets/completions >/dev/null
cargo deb --no-build --locked
