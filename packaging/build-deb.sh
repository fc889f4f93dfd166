#!/usr/bin/env bash
# Builds the Debian package: target/debian/sglang-log-exporter_<version>-1_<arch>.deb (its path
# is the last line printed). Needs cargo-deb (`cargo install cargo-deb --locked`); its settings
# are [package.metadata.deb] in Cargo.toml.
#
# The release binary is built first, then it writes its own man pages and shell completions
# (`sglang-log-exporter generate`, hidden from --help), then `cargo deb --no-build` packs it all.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo-deb >/dev/null; then
  echo "cargo-deb is missing: cargo install cargo-deb --locked" >&2
  exit 1
fi
cargo build --release --locked
bin=target/release/sglang-log-exporter
rm -rf target/deb-assets
"$bin" generate man target/deb-assets/man >/dev/null
gzip -9n target/deb-assets/man/*.1
"$bin" generate completions target/deb-assets/completions >/dev/null
cargo deb --no-build --locked
