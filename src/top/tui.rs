//! The terminal view: draws [`super::view`] frames with ratatui on the alternate screen,
//! refreshes every interval, and reads keys (from /dev/tty when stdin is the log, crossterm
//! does that) and resizes between refreshes. Colour only where the terminal has it and
//! `NO_COLOR` is not set.

use std::io::{self, Stdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::style::{Color, Modifier, Style as TuiStyle};
use ratatui::text::{Line as TuiLine, Span as TuiSpan, Text};
use ratatui::widgets::Paragraph;
use ratatui::Terminal;

use super::frame::{Frame, Style};
use super::history::History;
use super::view::{self, Opts};
use super::Source;
use crate::readout::Model;

/// Set by SIGTERM, SIGINT or SIGHUP.
static TERMINATED: AtomicBool = AtomicBool::new(false);

/// The terminal's settings before raw mode, for the signal handler to restore.
static mut SAVED: std::mem::MaybeUninit<libc::termios> = std::mem::MaybeUninit::uninit();
static SAVED_OK: AtomicBool = AtomicBool::new(false);

/// Leaves the screen as it was and ends the process, from the signal handler itself: when the
/// terminal hangs up (its window or tmux server closed), crossterm's event poll can spin inside
/// one call on the dead terminal and never return to check a flag, so the handler cannot leave
/// the exit to the main loop. Only async-signal-safe calls (write, tcsetattr, _exit).
extern "C" fn on_signal(sig: libc::c_int) {
    TERMINATED.store(true, Ordering::Relaxed);
    const LEAVE: &[u8] = b"\x1b[?25h\x1b[?1049l";
    // SAFETY: write/tcsetattr/_exit are async-signal-safe; SAVED is written once before the
    // handler is installed and only read here.
    unsafe {
        libc::write(1, LEAVE.as_ptr().cast(), LEAVE.len());
        if SAVED_OK.load(Ordering::Relaxed) {
            libc::tcsetattr(0, libc::TCSANOW, (*std::ptr::addr_of!(SAVED)).as_ptr());
        }
        libc::_exit(128 + sig);
    }
}

/// Remembers the terminal's settings (before raw mode) for [`on_signal`].
fn save_termios() {
    let mut t = std::mem::MaybeUninit::<libc::termios>::uninit();
    // SAFETY: tcgetattr fills the struct; it is copied into SAVED before any handler runs.
    unsafe {
        if libc::tcgetattr(0, t.as_mut_ptr()) == 0 {
            std::ptr::addr_of_mut!(SAVED).write(t);
            SAVED_OK.store(true, Ordering::Relaxed);
        }
    }
}

/// Restores the terminal when dropped (also when the view panics).
struct Screen {
    terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl Screen {
    fn open() -> io::Result<Screen> {
        terminal::enable_raw_mode()?;
        let mut out = io::stdout();
        if let Err(e) = execute!(out, terminal::EnterAlternateScreen, cursor::Hide) {
            let _ = terminal::disable_raw_mode();
            return Err(e);
        }
        Ok(Screen {
            terminal: Terminal::new(CrosstermBackend::new(out))?,
        })
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = execute!(
            self.terminal.backend_mut(),
            cursor::Show,
            terminal::LeaveAlternateScreen
        );
        let _ = terminal::disable_raw_mode();
    }
}

/// Whether to colour: a terminal that is not `dumb`, and `NO_COLOR` unset or empty.
pub fn colour_wanted() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let dumb = std::env::var("TERM").map_or(true, |t| t.is_empty() || t == "dumb");
    !no_color && !dumb
}

/// The terminal style of a frame style; without colour only bold, reverse and dim remain.
pub fn tui_style(s: Style, colour: bool) -> TuiStyle {
    let t = TuiStyle::default();
    match (s, colour) {
        (Style::Normal, _) => t,
        (Style::Title, true) => t.fg(Color::Cyan).add_modifier(Modifier::BOLD),
        (Style::Title | Style::Key, false) => t.add_modifier(Modifier::BOLD),
        (Style::Head, _) => t.add_modifier(Modifier::REVERSED),
        (Style::Dim, true) => t.fg(Color::DarkGray),
        (Style::Dim, false) => t.add_modifier(Modifier::DIM),
        (Style::Good, true) => t.fg(Color::Green),
        (Style::Warn, true) => t.fg(Color::Yellow),
        (Style::Bad, true) => t.fg(Color::Red).add_modifier(Modifier::BOLD),
        (Style::Good | Style::Warn, false) => t,
        (Style::Bad, false) => t.add_modifier(Modifier::BOLD),
        (Style::Key, true) => t.fg(Color::Cyan).add_modifier(Modifier::BOLD),
    }
}

fn to_text(f: &Frame, colour: bool) -> Text<'static> {
    Text::from(
        f.lines
            .iter()
            .map(|l| {
                TuiLine::from(
                    l.0.iter()
                        .map(|s| TuiSpan::styled(s.text.clone(), tui_style(s.style, colour)))
                        .collect::<Vec<_>>(),
                )
            })
            .collect::<Vec<_>>(),
    )
}

/// What a key asks for.
#[derive(Debug, PartialEq, Eq)]
enum Action {
    Quit,
    Redraw,
    Ignore,
}

/// Applies a key to the options; `page` is the body's height for PgUp/PgDn.
fn key(k: KeyEvent, o: &mut Opts, max_scroll: usize, page: usize) -> Action {
    if k.kind != KeyEventKind::Press {
        return Action::Ignore;
    }
    let ctrl_c = k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c');
    if ctrl_c || k.code == KeyCode::Char('q') {
        return Action::Quit;
    }
    if o.help {
        o.help = false;
        return Action::Redraw;
    }
    match k.code {
        KeyCode::Esc => return Action::Quit,
        KeyCode::Char('s') => o.sort = o.sort.next(),
        KeyCode::Char('g') => o.gpus = !o.gpus,
        KeyCode::Char('?') | KeyCode::Char('h') => o.help = true,
        KeyCode::Up | KeyCode::Char('k') => o.scroll = o.scroll.min(max_scroll).saturating_sub(1),
        KeyCode::Down | KeyCode::Char('j') => o.scroll = (o.scroll + 1).min(max_scroll),
        KeyCode::PageUp => o.scroll = o.scroll.min(max_scroll).saturating_sub(page),
        KeyCode::PageDown => o.scroll = (o.scroll + page).min(max_scroll),
        KeyCode::Home => o.scroll = 0,
        KeyCode::End => o.scroll = max_scroll,
        _ => return Action::Ignore,
    }
    Action::Redraw
}

/// Draws frames of `source` every `interval` until `q`; `fixed_now` replaces the clock.
///
/// # Errors
/// The terminal could not be set up or written.
pub fn run(
    source: &Source,
    mut opts: Opts,
    interval: Duration,
    fixed_now: Option<f64>,
) -> io::Result<()> {
    save_termios();
    for sig in [libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler makes only async-signal-safe calls (see `on_signal`).
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
    let colour = colour_wanted();
    let mut screen = Screen::open()?;
    let mut history = History::new(60.0);
    let mut next = Instant::now();
    let (mut model, mut now) = (Model::default(), 0.0);
    let mut max_scroll = 0;
    let mut page = 1;
    let mut refreshes = 0u32;
    while !TERMINATED.load(Ordering::Relaxed) {
        if Instant::now() >= next {
            let r = source.take(fixed_now);
            model = Model::from_families(&r.families);
            now = r.now;
            history.observe(&model, now);
            opts.problems = r.problems;
            // The first refreshes come sooner: the inputs are still being read.
            refreshes += 1;
            let wait = match refreshes {
                1..=3 => interval.min(Duration::from_millis(150)),
                _ => interval,
            };
            next = Instant::now() + wait;
        }
        screen.terminal.draw(|f| {
            let area = f.area();
            let (w, h) = (usize::from(area.width), usize::from(area.height));
            let frame = view::render(&model, now, w, h, &opts, Some(&history));
            max_scroll = frame.scroll_max;
            page = h.saturating_sub(8).max(1);
            f.render_widget(Paragraph::new(to_text(&frame, colour)), area);
        })?;
        // Wait for a key or a resize until the next refresh; a resize redraws at once.
        let mut left = next.saturating_duration_since(Instant::now());
        while !left.is_zero() && !TERMINATED.load(Ordering::Relaxed) {
            if event::poll(left.min(Duration::from_millis(500)))? {
                match event::read()? {
                    Event::Key(k) => match key(k, &mut opts, max_scroll, page) {
                        Action::Quit => return Ok(()),
                        Action::Redraw => break,
                        Action::Ignore => {}
                    },
                    Event::Resize(..) => break,
                    _ => {}
                }
            }
            left = next.saturating_duration_since(Instant::now());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    #[test]
    fn keys() {
        let mut o = Opts::default();
        assert_eq!(key(press(KeyCode::Char('s')), &mut o, 0, 1), Action::Redraw);
        assert_eq!(o.sort, view::Sort::Kv);
        key(press(KeyCode::Char('g')), &mut o, 0, 1);
        assert!(!o.gpus);
        key(press(KeyCode::Down), &mut o, 2, 1);
        key(press(KeyCode::Down), &mut o, 2, 1);
        key(press(KeyCode::Down), &mut o, 2, 1);
        assert_eq!(o.scroll, 2);
        key(press(KeyCode::Char('?')), &mut o, 2, 1);
        assert!(o.help);
        assert_eq!(key(press(KeyCode::Char('x')), &mut o, 2, 1), Action::Redraw);
        assert!(!o.help, "any key leaves the help");
        assert_eq!(key(press(KeyCode::Char('q')), &mut o, 2, 1), Action::Quit);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(key(ctrl_c, &mut o, 0, 1), Action::Quit);
    }
}
