//! Build script: names the git commit the binary is built from.
//!
//! `SGLANG_LOG_EXPORTER_REVISION` (set at compile time) is that commit, short: from the
//! environment variable of the same name when it is set (a build without `.git`, e.g. a
//! container build given `--build-arg REVISION=…`), else `git rev-parse --short=12 HEAD`, else
//! `unknown`. It appears in `--version` and in `sglang_log_exporter_build_info{revision}`.

use std::path::Path;
use std::process::Command;

const VAR: &str = "SGLANG_LOG_EXPORTER_REVISION";

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
}
