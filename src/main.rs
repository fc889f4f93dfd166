//! The `sglang-log-exporter` binary: parses the command line and hands over to [`app`].

use std::process::ExitCode;

use clap::Parser as _;
use sglang_log_exporter::cli::{Cli, Command};
use sglang_log_exporter::{app, check};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let level = match &cli.command {
        Some(Command::Top(t)) => t.log_level.clone(),
        _ => cli.run.log_level.clone(),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&level))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal: journald and log files get plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
    match cli.command {
        Some(Command::Check(a)) => check::run(&a),
        Some(Command::Backfill(a)) => sglang_log_exporter::backfill::run(&a),
        Some(Command::Generate(a)) => sglang_log_exporter::generate::run(&a),
        Some(Command::Top(a)) => sglang_log_exporter::top::run(*a),
        None => {
            let cfg = match app::Config::from_args(&cli.run) {
                Ok(c) => c,
                Err(e) => return fail(&e.to_string()),
            };
            if cli.run.once {
                return app::run_once(&cfg);
            }
            if cfg.inputs.is_empty() && cfg.journal.units.is_empty() && cfg.discover.is_none() {
                return fail(
                    "no inputs: give log files, - for stdin, --journal-unit or --input.glob (see --help)",
                );
            }
            match app::run_live(cfg) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(&e.to_string()),
            }
        }
    }
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(2)
}
