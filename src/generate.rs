//! `sglang-log-exporter generate man|completions DIR` (hidden): the man pages (clap_mangen) and
//! the bash, zsh and fish completions (clap_complete), made from the command line definition
//! itself so they never fall behind it. The Debian package build runs it.
//!
//! `sglang-log-exporter generate metrics-contract docs/metrics-contract.md`: the table of every
//! family the exporter exposes, made from the families registry ([`crate::catalog`]) and the
//! embedded pattern file, written between the file's markers ([`BEGIN`], [`END`]).

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

/// Writes the man pages or the completion scripts into `dir` (created if missing), or rewrites
/// the generated section of the contract file `dir`, and returns the files written.
///
/// # Errors
/// The I/O error of creating the directory or a file.
pub fn write(what: Generated, dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let cmd = Cli::command();
    match what {
        Generated::Man => {
            std::fs::create_dir_all(dir)?;
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
            std::fs::create_dir_all(dir)?;
            let mut cmd = public(&cmd);
            [Shell::Bash, Shell::Zsh, Shell::Fish]
                .into_iter()
                .map(|sh| clap_complete::generate_to(sh, &mut cmd, BIN, dir))
                .collect()
        }
        Generated::MetricsContract => {
            // `dir` is the contract file itself.
            rewrite_contract(dir)?;
            Ok(vec![dir.to_path_buf()])
        }
    }
}

/// The marker line that opens the generated section of the contract.
pub const BEGIN: &str = "<!-- BEGIN generated: sglang-log-exporter generate metrics-contract -->";
/// The marker line that closes it.
pub const END: &str = "<!-- END generated -->";

/// Rewrites the generated section of the contract file at `path` in place (unchanged elsewhere).
///
/// # Errors
/// The I/O error of reading or writing it; `InvalidData` when its markers are missing.
pub fn rewrite_contract(path: &Path) -> std::io::Result<()> {
    let text = std::fs::read_to_string(path)?;
    let new = with_section(&text, &contract_section())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    if new != text {
        std::fs::write(path, new)?;
    }
    Ok(())
}

/// `text` with what lies between its [`BEGIN`] and [`END`] lines replaced by `section`.
///
/// The section is written with the file's own line ending (`\r\n` where the file's lines end
/// so).
///
/// # Errors
/// Where either marker is missing, comes more than once, or they come in the wrong order.
pub fn with_section(text: &str, section: &str) -> Result<String, String> {
    for m in [BEGIN, END] {
        if text.matches(m).count() > 1 {
            return Err(format!(
                "{m:?} comes more than once: which section is meant?"
            ));
        }
    }
    let begin = text
        .find(BEGIN)
        .ok_or_else(|| format!("no {BEGIN:?} line"))?;
    let body = begin + BEGIN.len();
    let end = text[body..]
        .find(END)
        .map(|p| body + p)
        .ok_or_else(|| format!("no {END:?} line after {BEGIN:?}"))?;
    let (nl, section) = if text.contains("\r\n") {
        ("\r\n", section.replace('\n', "\r\n"))
    } else {
        ("\n", section.to_string())
    };
    Ok(format!("{}{nl}{section}{}", &text[..body], &text[end..]))
}

/// The generated section: one table row per family, in `/metrics` order.
pub fn contract_section() -> String {
    // The embedded file is part of the build; its tests hold that it loads.
    let pat = crate::parse::patterns::Patterns::embedded().expect("the embedded pattern file");
    let cell = |s: &str| s.replace('|', "\\|").replace('\n', " ");
    let or_dash = |s: String| if s.is_empty() { "-".to_string() } else { s };
    use crate::catalog::{RANK_LABELS, SERVER_LABELS};
    let origin = &SERVER_LABELS[..SERVER_LABELS.len() - 2];
    // Label sets many families share, named once above the table.
    let sets: [(&str, &[&str]); 3] = [
        ("*rank labels*", RANK_LABELS),
        ("*server labels*", SERVER_LABELS),
        ("*origin labels*", origin),
    ];
    let labels = |l: &[&'static str]| -> String {
        for (name, set) in sets {
            if let Some(rest) = l.strip_prefix(set) {
                return std::iter::once(name)
                    .chain(rest.iter().copied())
                    .collect::<Vec<_>>()
                    .join(", ");
            }
        }
        l.join(", ")
    };
    let mut out = String::from("\n");
    for (name, set) in sets {
        out.push_str(&format!("{name}: {}.\n", set.join(", ")));
    }
    out.push_str("\n| name | type | unit | labels | HELP | reads |\n|---|---|---|---|---|---|\n");
    for e in crate::catalog::every_family(pat.family_entries()) {
        let kind = match e.kind {
            crate::family::Kind::Gauge => "gauge",
            crate::family::Kind::Counter => "counter",
            crate::family::Kind::Histogram => "histogram",
        };
        out.push_str(&format!(
            "| {} | {kind} | {} | {} | {} | {} |\n",
            cell(&e.name),
            or_dash(cell(&e.unit)),
            or_dash(labels(&e.labels)),
            cell(&e.help),
            cell(&e.reads),
        ));
    }
    out.push('\n');
    out
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

    /// The generated section keeps the file's line endings, and a file with two sections is
    /// refused rather than half rewritten (trial of this stop).
    #[test]
    fn the_section_keeps_the_files_line_endings_and_one_section_is_asked() {
        let lf = format!("a\n{BEGIN}\nold\n{END}\nz\n");
        assert_eq!(
            with_section(&lf, "x\ny\n").unwrap(),
            format!("a\n{BEGIN}\nx\ny\n{END}\nz\n")
        );
        let crlf = lf.replace('\n', "\r\n");
        assert_eq!(
            with_section(&crlf, "x\ny\n").unwrap(),
            format!("a\r\n{BEGIN}\r\nx\r\ny\r\n{END}\r\nz\r\n")
        );
        // Blanks after the marker: still the file's endings.
        let blank = crlf.replace(&format!("{BEGIN}\r\n"), &format!("{BEGIN} \r\n"));
        assert!(!with_section(&blank, "x\ny\n")
            .unwrap()
            .replace("\r\n", "")
            .contains('\n'));
        let twice = format!("{lf}{lf}");
        assert!(with_section(&twice, "x\n")
            .unwrap_err()
            .contains("more than once"));
        assert!(with_section("a\n", "x\n").unwrap_err().contains("no "));
    }
}
