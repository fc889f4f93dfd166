//! `sglang-log-exporter top`: the state on the terminal, before anyone sets up Grafana.
//!
//! Every frame is built by a pure function ([`view::build`]) from metric families and "now",
//! wherever the families come from: this process's own state following local inputs (the same
//! source threads and state as the main mode, rendered by
//! [`crate::export::metrics::families`]), or running exporters scraped with `--url`.
//! `--snapshot` prints one frame as plain text; otherwise [`tui`] draws frames until `q`.

pub mod frame;
pub mod history;
pub use crate::prom_text;
pub mod scrape;
pub mod tui;
pub mod view;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::app::{self, Config};
use crate::clock::now_unix;
use crate::family::Family;
use crate::state::Shared;

pub use crate::cli::TopArgs;

/// Where the families come from.
pub enum Source {
    /// This process's state, fed by the source threads (or read to the end for a snapshot).
    Local {
        /// The state.
        state: Shared,
        /// Take "now" from the inputs' clock (a finished input), not the wall clock.
        input_clock: bool,
    },
    /// Scraped exporters, refreshed in the background.
    Urls(scrape::Background),
    /// One scrape of every exporter (a snapshot).
    Scraped {
        /// Their families.
        families: Vec<Family>,
        /// Scrapes that failed.
        errors: Vec<String>,
    },
}

/// What one refresh shows.
pub struct Refresh {
    /// The families.
    pub families: Vec<Family>,
    /// "Now", Unix seconds.
    pub now: f64,
    /// Problems to show (failed scrapes).
    pub problems: Vec<String>,
}

impl Source {
    /// The families now; `fixed_now` replaces the clock.
    pub fn take(&self, fixed_now: Option<f64>) -> Refresh {
        match self {
            Source::Local { state, input_clock } => {
                let s = crate::state::lock(state);
                let now = fixed_now.unwrap_or_else(|| match input_clock {
                    true => s.log_clock().unwrap_or_else(now_unix),
                    false => now_unix(),
                });
                let mut families = crate::export::metrics::families(&s, now);
                let gpu = s.gpu_unavailable.clone();
                drop(s);
                if *input_clock {
                    // Inputs read to their end: a source that ended (stdin, journalctl) is
                    // finished, not down.
                    families.retain(|f| f.name != crate::catalog::exporter::SOURCE_UP.name);
                }
                Refresh {
                    families,
                    now,
                    // Why, where this process read NVML itself (`--url` shows only that it
                    // is not read: `nvml_up` 0).
                    problems: gpu
                        .map(|why| format!("GPU memory unavailable: {why}"))
                        .into_iter()
                        .collect(),
                }
            }
            Source::Urls(bg) => {
                let (families, problems) = bg.take();
                Refresh {
                    families,
                    now: fixed_now.unwrap_or_else(now_unix),
                    problems,
                }
            }
            Source::Scraped { families, errors } => Refresh {
                families: families.clone(),
                now: fixed_now.unwrap_or_else(now_unix),
                problems: errors.clone(),
            },
        }
    }
}

/// Runs `top`; exit status 2 for bad arguments or inputs.
pub fn run(a: TopArgs) -> ExitCode {
    match start(a) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", crate::logging::escape_controls(&e));
            ExitCode::from(2)
        }
    }
}

fn start(a: TopArgs) -> Result<ExitCode, String> {
    let local = !a.inputs.is_empty() || !a.journal.units.is_empty();
    if local != a.urls.is_empty() {
        return Err(if local {
            "give either local inputs or --url, not both".into()
        } else {
            "nothing to show: give log files, - for stdin, --journal-unit or --url (see top --help)"
                .into()
        });
    }
    if a.interval < Duration::from_millis(100) {
        return Err("--interval must be at least 100ms".into());
    }
    if !a.snapshot && !std::io::stdout().is_terminal() {
        return Err("standard output is not a terminal: use --snapshot for plain text".into());
    }
    let tz = app::timezone(a.read.timezone.as_deref()).map_err(|e| e.to_string())?;
    let (snapshot, now, interval) = (a.snapshot, a.now, a.interval);
    let width = a.width;
    let source = if local {
        local_source(a)?
    } else {
        url_source(&a)?
    };
    let opts = view::Opts {
        snapshot,
        tz,
        refresh: interval_text(interval),
        ..view::Opts::default()
    };
    if snapshot {
        let r = source.take(now);
        let width = width.unwrap_or_else(terminal_width);
        let mut o = opts;
        o.problems = r.problems;
        let f = view::build(&r.families, r.now, width, usize::MAX, &o, None);
        return Ok(match crate::app::write_stdout(f.to_plain().as_bytes()) {
            crate::app::Written::Failed => ExitCode::FAILURE,
            _ => ExitCode::SUCCESS,
        });
    }
    tui::run(&source, opts, interval, now).map_err(|e| format!("terminal: {e}"))?;
    Ok(ExitCode::SUCCESS)
}

/// `1s`, `500ms`, `2.5s`.
fn interval_text(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

fn terminal_width() -> usize {
    match ratatui::crossterm::terminal::size() {
        Ok((w, _)) if std::io::stdout().is_terminal() && w > 0 => usize::from(w),
        _ => 100,
    }
}

/// The main mode's configuration for `top`'s local inputs: defaults, then `top`'s options.
fn run_args(a: TopArgs) -> crate::cli::RunArgs {
    use clap::Parser as _;
    let mut run = crate::cli::Cli::parse_from(["sglang-log-exporter"]).run;
    run.inputs = a.inputs;
    run.once = a.snapshot;
    run.journal = a.journal;
    run.gpus = a.gpus;
    run.gpu_nvml_library = a.gpu_nvml_library;
    run.gpu_disable = a.gpu_disable;
    run.read = a.read;
    run
}

fn local_source(a: TopArgs) -> Result<Source, String> {
    let snapshot = a.snapshot;
    let cfg = Config::from_args(&run_args(a)).map_err(|e| e.to_string())?;
    if snapshot {
        let state = app::read_to_end(&cfg).map_err(|e| e.to_string())?;
        return Ok(Source::Local {
            state,
            input_clock: true,
        });
    }
    // The source threads end with the process; `top` never stops them earlier.
    let stop = Arc::new(crate::stop::Stop::new());
    let state = crate::state::State::shared(cfg.patterns.clone(), cfg.state.clone());
    app::spawn_sources(&Arc::new(cfg), &state, &stop).map_err(|e| e.to_string())?;
    Ok(Source::Local {
        state,
        input_clock: false,
    })
}

fn url_source(a: &TopArgs) -> Result<Source, String> {
    let client = scrape::ClientArgs {
        user: a.url_user.clone(),
        password_file: a.url_password_file.clone(),
        ca_file: a.url_ca_file.clone(),
        timeout: a.url_timeout,
    };
    let scraper = scrape::Scraper::new(&a.urls, &client)?;
    if a.snapshot {
        let mut families = Vec::new();
        let mut errors = Vec::new();
        for i in 0..scraper.targets.len() {
            match scraper.scrape(i) {
                Ok(f) => families.extend(f),
                Err(e) => errors.push(e),
            }
        }
        if families.is_empty() && !errors.is_empty() {
            return Err(errors.join("; "));
        }
        return Ok(Source::Scraped { families, errors });
    }
    let bg = scrape::Background::start(scraper, a.interval)
        .map_err(|e| format!("cannot start the scraper: {e}"))?;
    Ok(Source::Urls(bg))
}
