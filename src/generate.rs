//! `sglang-log-exporter generate man|completions DIR` (hidden): the man pages (clap_mangen) and
//! the bash, zsh and fish completions (clap_complete), made from the command line definition
//! itself so they never fall behind it. The Debian package build runs it.

use std::path::Path;
use std::process::ExitCode;

use clap::CommandFactory as _;
use clap_complete::Shell;

use crate::cli::{Cli, GenerateArgs, Generated};

/// The command name the completions are for.
const BIN: &str = "sglang-log-exporter";

/// Writes what `a` asks for; exit status 2 when the directory cannot be written.
pub fn run(a: &GenerateArgs) -> ExitCode {
    match write(a.what, &a.dir) {
        Ok(files) => {
            for f in files {
                println!("{}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {}: {e}", a.dir.display());
            ExitCode::from(2)
        }
    }
}

/// Writes the man pages or the completion scripts into `dir` (created if missing) and returns
/// the files written.
///
/// # Errors
/// The I/O error of creating the directory or a file.
pub fn write(what: Generated, dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let cmd = Cli::command();
    match what {
        Generated::Man => {
            // One page per command; hidden commands (this one) are left out.
            clap_mangen::generate_to(cmd, dir)?;
            let mut files: Vec<_> = std::fs::read_dir(dir)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "1"))
                .collect();
            files.sort();
            Ok(files)
        }
        Generated::Completions => {
            let mut cmd = public(&cmd);
            [Shell::Bash, Shell::Zsh, Shell::Fish]
                .into_iter()
                .map(|sh| clap_complete::generate_to(sh, &mut cmd, BIN, dir))
                .collect()
        }
    }
}

/// `cmd` without its hidden options and subcommands (clap_complete, unlike clap_mangen, would
/// offer them).
fn public(cmd: &clap::Command) -> clap::Command {
    let mut c = clap::Command::new(BIN)
        .version(crate::cli::VERSION)
        .args(cmd.get_arguments().filter(|a| !a.is_hide_set()).cloned())
        .subcommands(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
        .args_conflicts_with_subcommands(true);
    if let Some(a) = cmd.get_about() {
        c = c.about(a.clone());
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn man_pages_and_completions_name_the_options_and_hide_generate() {
        let dir = tempfile::tempdir().unwrap();
        let man = write(Generated::Man, dir.path()).unwrap();
        let names: Vec<_> = man
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "sglang-log-exporter-backfill.1",
                "sglang-log-exporter-check.1",
                "sglang-log-exporter-top.1",
                "sglang-log-exporter.1"
            ]
        );
        let page = std::fs::read_to_string(dir.path().join("sglang-log-exporter.1")).unwrap();
        assert!(page.contains("web.listen\\-address"), "{page}");
        assert!(!page.contains("generate"), "{page}");
        let comp = write(Generated::Completions, dir.path()).unwrap();
        assert_eq!(comp.len(), 3);
        let bash = std::fs::read_to_string(dir.path().join("sglang-log-exporter.bash")).unwrap();
        assert!(bash.contains("--gpu.disable"), "{bash}");
        assert!(bash.contains("check backfill top help"), "{bash}");
        assert!(!bash.contains("generate"), "{bash}");
        assert!(!bash.contains("--gpu.retry-interval"), "{bash}");
        assert!(dir.path().join("_sglang-log-exporter").exists());
        assert!(dir.path().join("sglang-log-exporter.fish").exists());
    }
}
