//! `packaging/build-deb.sh` on a machine that lacks what it needs, run as check-deb.sh runs it
//! (`bash packaging/build-deb.sh`, the package path the last line of stdout): a stand-in `cargo`
//! on a `PATH` of only the tools named here records every call, so the steps before the build
//! are seen without building anything.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use crate::common::root;

/// The pin of .ci/run, which build-deb.sh must install the same.
const INSTALL: &str = "cargo install cargo-deb --locked --version 3.8.0";

fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Runs build-deb.sh with `bin` as the whole `PATH`, after linking the system tools it uses
/// there (`tools`: the optional ones). `cargo` (when `cargo` is given) logs its arguments to `bin/calls`: `deb --version`
/// fails until `install` ran and `install_ok`; `build` exits 7, which ends the script there.
fn run(bin: &Path, cargo: bool, install_ok: bool, tools: &[&str]) -> (Output, Vec<String>) {
    for t in ["dirname", "rm", "gzip", "sh"].iter().chain(tools) {
        let real = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(t))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("no {t} on this machine"));
        if !bin.join(t).exists() {
            std::os::unix::fs::symlink(real, bin.join(t)).unwrap();
        }
    }
    let calls = bin.join("calls");
    if cargo {
        let ok = if install_ok {
            ": > \"$d/installed\""
        } else {
            ""
        };
        script(
            &bin.join("cargo"),
            &format!(
                "d=$(dirname \"$0\")\necho \"$*\" >> \"$d/calls\"\ncase \"$1\" in\n  deb) [ -e \"$d/installed\" ] || exit 101 ;;\n  install) {ok}\n    [ -e \"$d/installed\" ] || exit 101 ;;\n  build) exit 7 ;;\nesac\n"
            ),
        );
    }
    let out = Command::new("/bin/bash")
        .arg(root().join("packaging/build-deb.sh"))
        .env_clear()
        .env("PATH", bin)
        .env("HOME", bin)
        .output()
        .unwrap();
    let log = std::fs::read_to_string(&calls).unwrap_or_default();
    (out, log.lines().map(String::from).collect())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Without cargo-deb it installs the pinned version, then builds; nothing of the install on
/// stdout, whose last line check-deb.sh takes for the package.
#[test]
fn build_deb_installs_the_pinned_cargo_deb_when_missing() {
    let dir = tempfile::tempdir().unwrap();
    let (out, calls) = run(dir.path(), true, true, &["dpkg-shlibdeps", "strip"]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    assert_eq!(
        calls,
        [
            "deb --version",
            "install cargo-deb --locked --version 3.8.0",
            "deb --version",
            "build --release --locked",
        ]
    );
    assert!(out.stdout.is_empty(), "{:?}", out.stdout);
    assert!(
        stderr(&out).contains(&format!(
            "build-deb: cargo-deb is missing; installing it: {INSTALL}\n"
        )),
        "{}",
        stderr(&out)
    );
    // Installed already: straight to the build.
    std::fs::remove_file(dir.path().join("calls")).unwrap();
    let (out, calls) = run(dir.path(), true, true, &["dpkg-shlibdeps", "strip"]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    assert_eq!(calls, ["deb --version", "build --release --locked"]);
}

/// The install fails (no network, say): exit 1, the exact command printed, nothing built.
#[test]
fn build_deb_names_the_cargo_deb_install_when_it_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (out, calls) = run(dir.path(), true, false, &["dpkg-shlibdeps", "strip"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        calls,
        [
            "deb --version",
            "install cargo-deb --locked --version 3.8.0"
        ]
    );
    assert!(
        stderr(&out).ends_with(&format!(
            "build-deb: could not install cargo-deb; install it with: {INSTALL}\n"
        )),
        "{}",
        stderr(&out)
    );
    assert!(out.stdout.is_empty());
}

/// No dpkg-shlibdeps or strip: the Debian packages are named, before any install; no cargo:
/// Rust is named.
#[test]
fn build_deb_names_the_debian_packages_and_rust_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let (out, calls) = run(dir.path(), true, true, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(calls.is_empty(), "{calls:?}");
    assert_eq!(
        stderr(&out),
        "build-deb: missing dpkg-dev binutils: sudo apt-get install dpkg-dev binutils\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = run(dir.path(), false, false, &["dpkg-shlibdeps", "strip"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "build-deb: cargo is missing: install Rust 1.88 or newer (rustup), then run this again\n"
    );
}
