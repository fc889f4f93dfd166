//! The `sglang-log-exporter` binary: parses the command line and hands over to [`app`].

use std::process::ExitCode;

use clap::Parser as _;
use sglang_log_exporter::cli::{Cli, Command, LogFormat};
use sglang_log_exporter::{app, check, logging};

/// Two malloc arenas, whatever the threads: glibc gives each thread that allocates an arena of
/// its own (up to eight a core), and an arena keeps what it once held. The exposition is
/// encoded on whichever blocking thread a scrape lands on, so with lines arriving every arena
/// came to hold an encoding's worth: 200 keep-alive scrapers at 17k series took RSS from 39 to
/// 290 MB, 84 MB with two arenas at the same scrape rate (bench/clients.py). An explicit
/// `MALLOC_ARENA_MAX` in the environment wins.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets an allocator parameter; called before any other thread.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

fn main() -> ExitCode {
    limit_malloc_arenas();
    let cli = Cli::parse();
    let level = match &cli.command {
        Some(Command::Top(t)) => t.log_level.clone(),
        _ => cli.run.log_level.clone(),
    };
    // `--log.format` is the main mode's; the subcommands log as text.
    let format = match &cli.command {
        None => cli.run.log_format,
        Some(_) => LogFormat::Text,
    };
    init_logging(&level, format);
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
            if cfg.inputs.is_empty()
                && cfg.journal.units.is_empty()
                && cfg.discover.is_none()
                // --sglang.from-logs polls what the logs name: no input of its own.
                && cfg.api.as_ref().is_none_or(|a| a.targets.is_empty())
            {
                return fail(
                    "no inputs: give log files, - for stdin, --journal-unit, --input.glob or --sglang.url (see --help)",
                );
            }
            if cli.run.once {
                return app::run_once(&cfg);
            }
            match app::run_live(cfg) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(&e.to_string()),
            }
        }
    }
}

/// The exporter's own messages on stderr at `level` (`RUST_LOG` wins), in `format`.
fn init_logging(level: &str, format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(level))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    match format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            // Colour codes only on a terminal: journald and log files get plain text.
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_target(false)
            // Field values escaped: a file name must not start a forged line (repro 28).
            .fmt_fields(logging::TextFields)
            .init(),
        LogFormat::Json | LogFormat::Logfmt => tracing_subscriber::fmt()
            .event_format(match format {
                LogFormat::Json => logging::Lines::Json,
                _ => logging::Lines::Logfmt,
            })
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init(),
    }
}

fn fail(msg: &str) -> ExitCode {
    // A message may name a path from the input: escaped for the terminal (repro 27).
    eprintln!("error: {}", logging::escape_controls(msg));
    ExitCode::from(2)
}
