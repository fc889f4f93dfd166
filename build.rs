//! Build script: names the git commit the binary is built from.
//!
//! `SGLANG_LOG_EXPORTER_REVISION` (set at compile time) is that commit, short: from the
//! environment variable of the same name when it is set (a build without `.git`, e.g. a
//! container build given `--build-arg REVISION=…`), else `git rev-parse --short=12 HEAD`, else
//! `unknown`. It appears in `--version` and in `sglang_log_exporter_build_info{revision}`.
//!
//! `SGLANG_LOG_EXPORTER_BRANCH` is the branch built, likewise (env, else `git rev-parse
//! --abbrev-ref HEAD` unless detached, else `unknown`), and `SGLANG_LOG_EXPORTER_RUSTC` the
//! compiler's version (`rustc -V`'s second word, `1.86.0`; else `unknown`): the `branch` and
//! `rustc` labels of `sglang_log_exporter_build_info`, as Go exporters' `goversion`.

use std::path::Path;
use std::process::Command;

const VAR: &str = "SGLANG_LOG_EXPORTER_REVISION";
const BRANCH: &str = "SGLANG_LOG_EXPORTER_BRANCH";
const RUSTC: &str = "SGLANG_LOG_EXPORTER_RUSTC";

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed={VAR}");
    let from_env = std::env::var(VAR).ok().filter(|s| !s.trim().is_empty());
    let revision = match from_env {
        Some(r) => r.trim().to_string(),
        None => {
            // Rebuild when HEAD moves: HEAD itself (a checkout), the branch it names (a commit)
            // and packed-refs. `--git-path` finds them in a worktree too. Only existing files are
            // named: a missing one would make Cargo rerun this script on every build.
            let mut watch = vec!["HEAD".to_string(), "packed-refs".to_string()];
            if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
                watch.push(r);
            }
            for w in &watch {
                if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", w]) {
                    if Path::new(&p).exists() {
                        println!("cargo:rerun-if-changed={p}");
                    }
                }
            }
            git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_string())
        }
    };
    println!("cargo:rustc-env={VAR}={revision}");
    println!("cargo:rerun-if-env-changed={BRANCH}");
    let branch = std::env::var(BRANCH)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| git(&["rev-parse", "--abbrev-ref", "HEAD"]).filter(|b| b != "HEAD"))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env={BRANCH}={branch}");
    // Cargo names the compiler it builds with in $RUSTC.
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let version = Command::new(rustc)
        .arg("-V")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|v| v.split_whitespace().nth(1).map(str::to_string))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env={RUSTC}={version}");
}
