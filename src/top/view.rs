//! The screen `top` shows, built by pure functions of the metric families, "now", the screen's
//! size and the view options: the terminal view, `--snapshot` and the tests all draw the frames
//! these return.

use jiff::tz::TimeZone;

use super::frame::{age, bar, cut, gib, level, num, pad, rpad, Frame, Line, Style};
use super::history::History;
use crate::family::Family;
use crate::readout::{percent, Gpu, Model, Rank, RouterWorker, Server};

/// How the ranks of each server are ordered (`s` cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    /// By rank (DP, PP, TP, … as numbers).
    #[default]
    Rank,
    /// Fullest KV cache first.
    Kv,
    /// Longest queue first.
    Queue,
    /// Oldest stats line first (a rank that stopped printing).
    Age,
}

impl Sort {
    /// The next order in the cycle.
    pub fn next(self) -> Sort {
        match self {
            Sort::Rank => Sort::Kv,
            Sort::Kv => Sort::Queue,
            Sort::Queue => Sort::Age,
            Sort::Age => Sort::Rank,
        }
    }

    /// Its name in the footer.
    pub fn name(self) -> &'static str {
        match self {
            Sort::Rank => "rank",
            Sort::Kv => "kv",
            Sort::Queue => "queue",
            Sort::Age => "age",
        }
    }
}

/// View options: what the keys changed, and what the caller knows beyond the families.
#[derive(Debug, Clone)]
pub struct Opts {
    /// Order of the ranks within each server.
    pub sort: Sort,
    /// Show the GPU section (when there are GPUs).
    pub gpus: bool,
    /// Show the help instead of the tables.
    pub help: bool,
    /// Body lines scrolled away at the top.
    pub scroll: usize,
    /// A one-off frame (`--snapshot`): every row whatever the height, no key footer, and
    /// retractions as totals (there is no earlier refresh to take a difference from).
    pub snapshot: bool,
    /// Zone of the clock in the title.
    pub tz: TimeZone,
    /// Problems to show under the totals (a scrape that failed, …).
    pub problems: Vec<String>,
    /// The refresh interval, as shown in the footer (`1s`).
    pub refresh: String,
}

impl Default for Opts {
    fn default() -> Opts {
        Opts {
            sort: Sort::Rank,
            gpus: true,
            help: false,
            scroll: 0,
            snapshot: false,
            tz: TimeZone::UTC,
            problems: Vec::new(),
            refresh: "1s".into(),
        }
    }
}

/// The frame for `families` at `now` (Unix seconds) on a `width` × `height` screen.
/// `history` gives retractions over its window; without it (a snapshot) they are totals.
pub fn build(
    families: &[Family],
    now: f64,
    width: usize,
    height: usize,
    opts: &Opts,
    history: Option<&History>,
) -> Frame {
    render(
        &Model::from_families(families),
        now,
        width,
        height,
        opts,
        history,
    )
}

/// [`build`] from a model already picked out of the families.
pub fn render(
    m: &Model,
    now: f64,
    width: usize,
    height: usize,
    opts: &Opts,
    history: Option<&History>,
) -> Frame {
    let retr = Retr::new(opts, history);
    let mut top = header(m, now, opts, &retr);
    top.push(Line::new());
    let (pinned, body) = if opts.help {
        (None, help())
    } else {
        let (head, mut rows) = ranks_table(m, now, width, opts, &retr);
        if opts.gpus && !m.gpus.is_empty() {
            rows.push(Line::new());
            rows.extend(gpu_table(m, width));
        }
        (Some(head), rows)
    };
    top.extend(pinned);
    let mut frame = Frame::default();
    if opts.snapshot {
        frame.lines = top.into_iter().chain(body).collect();
    } else {
        let avail = height.saturating_sub(top.len() + 1);
        let max_scroll = body.len().saturating_sub(avail);
        let scroll = opts.scroll.min(max_scroll);
        frame.lines = top;
        frame
            .lines
            .extend(body.iter().skip(scroll).take(avail).cloned());
        frame.lines.truncate(height.saturating_sub(1));
        // The footer stays on the last line.
        frame.lines.resize(height.saturating_sub(1), Line::new());
        let below = body.len().saturating_sub(scroll + avail);
        frame.lines.push(footer(opts, width, scroll, below));
        frame.scroll_max = max_scroll;
    }
    frame.lines = frame
        .lines
        .into_iter()
        .map(|l| l.truncated(width))
        .collect();
    frame
}

/// Retractions as shown: the increase over the history's window, or totals.
struct Retr<'a> {
    history: Option<&'a History>,
    head: String,
}

impl<'a> Retr<'a> {
    fn new(opts: &Opts, history: Option<&'a History>) -> Retr<'a> {
        let history = history.filter(|_| !opts.snapshot);
        let head = match history {
            Some(h) if h.window() == 60.0 => "RETR/1m".to_string(),
            Some(h) => format!("RETR/{}", age(h.window())),
            None => "RETR".to_string(),
        };
        Retr { history, head }
    }

    fn of(&self, s: &Server, r: &Rank) -> Option<f64> {
        match self.history {
            Some(h) => h.recent(&s.instance, &s.name, &r.id),
            None => r.retractions,
        }
    }
}

fn header(m: &Model, now: f64, opts: &Opts, retr: &Retr) -> Vec<Line> {
    let ranks = m.ranks().count();
    let when = jiff::Timestamp::from_second(now.floor() as i64)
        .map(|t| {
            t.to_zoned(opts.tz.clone())
                .strftime("%Y-%m-%d %H:%M:%S %Z")
                .to_string()
        })
        .unwrap_or_default();
    let plural = |n: usize, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
    let mut title = Line::new().with("sglang top", Style::Title);
    title.push(format!("  {when}  "), Style::Normal);
    let mut counts = vec![plural(m.servers.len(), "server"), plural(ranks, "rank")];
    if !m.gpus.is_empty() {
        counts.push(plural(m.gpus.len(), "GPU"));
    }
    title.push(counts.join(", "), Style::Dim);
    let mut lines = vec![title, models(m), totals(m, retr)];
    let problems: Vec<String> = m
        .down_sources
        .iter()
        .map(|s| format!("source down: {s}"))
        .chain(m.api_down.iter().map(|s| format!("SGLang API down: {s}")))
        .chain(opts.problems.iter().cloned())
        .collect();
    // A local NVML failure says why (in `opts.problems`); an exporter's says it is not read.
    let gpu_said = problems
        .iter()
        .any(|p| p.starts_with("GPU memory unavailable"));
    let problems: Vec<String> = match m.nvml_down && !gpu_said {
        true => problems
            .into_iter()
            .chain(["GPU memory unavailable: NVML is not read (see the exporter's log)".into()])
            .collect(),
        false => problems,
    };
    for p in problems.iter().take(3) {
        lines.push(Line::new().with(format!("! {p}"), Style::Bad));
    }
    if problems.len() > 3 {
        let more = format!("! … {} more problems", problems.len() - 3);
        lines.push(Line::new().with(more, Style::Bad));
    }
    lines
}

/// `model A (prefill, decode); B (unified)`.
fn models(m: &Model) -> Line {
    let mut seen: Vec<(String, Vec<String>)> = Vec::new();
    for s in &m.servers {
        let name = if s.model_name.is_empty() {
            "-".to_string()
        } else {
            s.model_name.clone()
        };
        let i = match seen.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None => {
                seen.push((name, Vec::new()));
                seen.len() - 1
            }
        };
        let e = if s.engine_type.is_empty() {
            "?"
        } else {
            &s.engine_type
        };
        if !seen[i].1.iter().any(|x| x == e) {
            seen[i].1.push(e.to_string());
        }
    }
    let mut l = Line::new().with(
        if seen.len() > 1 { "models " } else { "model " },
        Style::Dim,
    );
    let text: Vec<String> = seen
        .iter()
        .map(|(n, e)| format!("{n} ({})", e.join(", ")))
        .collect();
    l.push(
        if text.is_empty() {
            "-".to_string()
        } else {
            text.join("; ")
        },
        Style::Normal,
    );
    l
}

/// `total  run 35  queue 2  gen 1635 tok/s  in 0 tok/s  KV 12.3% 96.6k/786.4k  RETR/1m 0`.
fn totals(m: &Model, retr: &Retr) -> Line {
    let sum = |f: fn(&Rank) -> Option<f64>| m.ranks().filter_map(f).reduce(|a, b| a + b);
    let show = |v: Option<f64>| v.map_or("-".to_string(), num);
    let mut l = Line::new().with("total", Style::Dim);
    for (name, v) in [("run", sum(|r| r.running)), ("queue", sum(|r| r.queued))] {
        l.push(format!("  {name} "), Style::Dim);
        l.push(show(v), Style::Normal);
    }
    for (name, v) in [
        ("gen", sum(|r| r.gen_throughput)),
        ("in", sum(|r| r.input_throughput)),
    ] {
        if v.is_none() {
            continue;
        }
        l.push(format!("  {name} "), Style::Dim);
        l.push(show(v), Style::Normal);
        l.push(" tok/s", Style::Dim);
    }
    // Ranks that print stats (with used tokens) and know their capacity; TP ranks that only
    // logged the capacity would count one pool several times. A hybrid SWA rank adds the pool
    // its row shows (the fuller), its used tokens with that pool's own capacity, never SGLang's
    // larger-pool count with the full pool's.
    let (mut used, mut cap) = (None::<f64>, 0.0);
    for r in m.ranks() {
        if let (Some(u), Some(c), _) = r.kv_tokens() {
            *used.get_or_insert(0.0) += u;
            cap += c;
        }
    }
    l.push("  KV ", Style::Dim);
    match used {
        Some(u) if cap > 0.0 => {
            l.push(percent(u / cap), level(u / cap));
            l.push(format!(" {}/{}", num(u), num(cap)), Style::Normal);
        }
        // No rank knows both its used tokens and its capacity, yet rows may show SGLang's token
        // usage: no total can be made, so the header shows the fullest rank, as the rows do.
        _ => match m.ranks().filter_map(Rank::kv_fraction).reduce(f64::max) {
            Some(f) => {
                l.push("max ", Style::Dim);
                l.push(percent(f), level(f));
            }
            None => l.push("-", Style::Normal),
        },
    }
    let r: Option<f64> = m
        .servers
        .iter()
        .flat_map(|s| s.ranks.iter().filter_map(move |r| retr.of(s, r)))
        .reduce(|a, b| a + b);
    l.push(format!("  {} ", retr.head), Style::Dim);
    l.push(
        show(r),
        if r.unwrap_or(0.0) > 0.0 {
            Style::Warn
        } else {
            Style::Normal
        },
    );
    l
}

/// The columns of the ranks table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
    Rank,
    Kv,
    Tokens,
    Run,
    Queue,
    Gen,
    Input,
    Pd,
    Retr,
    Age,
}

impl Col {
    /// Columns that go first when the screen is narrow have the lowest priority.
    fn priority(self) -> u8 {
        match self {
            Col::Rank | Col::Kv => 255,
            Col::Age => 250,
            Col::Run => 240,
            Col::Queue => 230,
            Col::Gen => 220,
            Col::Input => 210,
            Col::Pd => 120,
            Col::Retr => 100,
            Col::Tokens => 90,
        }
    }
}

/// Narrowest and widest KV bar (brackets included).
const KV_BAR: (usize, usize) = (10, 32);

/// One rank row's cells (the KV bar is drawn at the table's width).
struct Row<'a> {
    rank: &'a Rank,
    /// Column, text, short text (for a narrow screen), style.
    cells: Vec<(Col, String, String, Style)>,
}

fn ranks_table(m: &Model, now: f64, width: usize, opts: &Opts, retr: &Retr) -> (Line, Vec<Line>) {
    let mut rows: Vec<Row> = Vec::new();
    let mut groups = Vec::new();
    for s in &m.servers {
        let mut ranks: Vec<&Rank> = s.ranks.iter().collect();
        sort_ranks(&mut ranks, opts.sort);
        groups.push((s, rows.len(), ranks.len()));
        rows.extend(ranks.into_iter().map(|r| Row {
            rank: r,
            cells: cells(s, r, now, retr),
        }));
    }
    let mut cols = vec![
        Col::Rank,
        Col::Kv,
        Col::Tokens,
        Col::Run,
        Col::Queue,
        Col::Gen,
    ];
    if m.ranks().any(|r| r.input_throughput.is_some()) {
        cols.push(Col::Input);
    }
    if m.ranks().any(Rank::has_pd) {
        cols.push(Col::Pd);
    }
    cols.extend([Col::Retr, Col::Age]);
    let col_width = |c: Col, short: bool| {
        rows.iter()
            .flat_map(|r| r.cells.iter().filter(|x| x.0 == c))
            .map(|x| if short { &x.2 } else { &x.1 }.chars().count())
            .chain([head_text(c, retr).chars().count()])
            .max()
            .unwrap_or(0)
    };
    let mut widths: Vec<(Col, usize)> = cols
        .iter()
        .map(|&c| match c {
            Col::Kv => (c, KV_BAR.0 + 7),
            _ => (c, col_width(c, false)),
        })
        .collect();
    let (gap, short) = fit(&mut widths, width, col_width(Col::Pd, true));
    let kv_w = kv_width(&widths, gap, width);
    let head = head_line(&widths, gap, kv_w, width, retr);
    let mut lines = Vec::new();
    for (s, first, n) in groups {
        lines.push(group_line(s));
        lines.extend(s.router_workers.iter().map(worker_line));
        if n == 0 {
            lines.push(Line::new().with("  (no stats line yet)", Style::Dim));
        }
        for row in &rows[first..first + n] {
            lines.push(row_line(row, &widths, gap, kv_w, short));
        }
    }
    if !m.uncovered_workers.is_empty() {
        lines.push(
            Line::new()
                .with("router workers not covered", Style::Title)
                .with(
                    "  no log or API read here is the server at these URLs",
                    Style::Dim,
                ),
        );
        lines.extend(m.uncovered_workers.iter().map(worker_line));
    }
    (head, lines)
}

/// A router's word on a worker, under its server: `  router gw → http://h:30000: 2 in flight,
/// healthy, circuit closed` (unhealthy or an open circuit in the error style).
fn worker_line(w: &RouterWorker) -> Line {
    let style = if w.healthy == Some(0.0) || w.circuit == Some(1.0) {
        Style::Bad
    } else if w.circuit == Some(2.0) {
        Style::Warn
    } else {
        Style::Normal
    };
    let at = match w.instance.as_str() {
        "" => String::new(),
        i => format!(" @ {i}"),
    };
    let flight = w.requests_active.map_or("-".into(), num);
    Line::new()
        .with(
            format!("  router {}{at} → {}: ", w.router, w.worker),
            Style::Dim,
        )
        .with(
            format!(
                "{flight} in flight, {}, circuit {}",
                w.health_text(),
                w.circuit_text()
            ),
            style,
        )
}

fn head_text(c: Col, retr: &Retr) -> String {
    match c {
        Col::Rank => "  RANK".to_string(),
        Col::Kv => "KV CACHE".into(),
        Col::Tokens => "USED/CAP".into(),
        Col::Run => "RUN".into(),
        Col::Queue => "QUEUE".into(),
        Col::Gen => "GEN t/s".into(),
        Col::Input => "IN t/s".into(),
        Col::Pd => "PD QUEUES".into(),
        Col::Retr => retr.head.clone(),
        Col::Age => "AGE".into(),
    }
}

/// The column headers, as one reversed line across the whole width.
fn head_line(widths: &[(Col, usize)], gap: usize, kv_w: usize, width: usize, retr: &Retr) -> Line {
    let mut head = String::new();
    for (i, &(c, w)) in widths.iter().enumerate() {
        let w = if c == Col::Kv { kv_w } else { w };
        let h = head_text(c, retr);
        head.push_str(&if right(c) { rpad(&h, w) } else { pad(&h, w) });
        if i + 1 < widths.len() {
            head.push_str(&" ".repeat(gap));
        }
    }
    Line::new().with(pad(&head, width), Style::Head)
}

fn right(c: Col) -> bool {
    !matches!(c, Col::Rank | Col::Kv | Col::Pd | Col::Tokens | Col::Age)
}

/// Makes the table fit `width`: a gap of 1 instead of 2 between columns, then the short PD
/// queue texts (`pd_short` wide), then without the lowest-priority columns. Returns the gap and
/// whether the short texts are used.
fn fit(widths: &mut Vec<(Col, usize)>, width: usize, pd_short: usize) -> (usize, bool) {
    let need = |w: &[(Col, usize)], gap: usize| {
        w.iter().map(|x| x.1).sum::<usize>() + gap * w.len().saturating_sub(1)
    };
    if need(widths, 2) <= width {
        return (2, false);
    }
    if need(widths, 1) <= width {
        return (1, false);
    }
    for w in widths.iter_mut().filter(|w| w.0 == Col::Pd) {
        w.1 = pd_short;
    }
    while need(widths, 1) > width {
        let Some(i) = widths
            .iter()
            .enumerate()
            .filter(|(_, x)| x.0.priority() < 255)
            .min_by_key(|(_, x)| x.0.priority())
            .map(|(i, _)| i)
        else {
            break;
        };
        widths.remove(i);
    }
    (if need(widths, 2) <= width { 2 } else { 1 }, true)
}

/// The KV column's width: what the other columns leave, within [`KV_BAR`] plus the percentage.
fn kv_width(widths: &[(Col, usize)], gap: usize, width: usize) -> usize {
    let others: usize = widths
        .iter()
        .filter(|x| x.0 != Col::Kv)
        .map(|x| x.1)
        .sum::<usize>()
        + gap * widths.len().saturating_sub(1);
    width
        .saturating_sub(others)
        .clamp(KV_BAR.0 + 7, KV_BAR.1 + 7)
}

fn sort_ranks(ranks: &mut [&Rank], sort: Sort) {
    let desc = |v: Option<f64>| -v.unwrap_or(f64::NEG_INFINITY);
    match sort {
        Sort::Rank => {}
        Sort::Kv => ranks.sort_by(|a, b| desc(a.kv_fraction()).total_cmp(&desc(b.kv_fraction()))),
        Sort::Queue => ranks.sort_by(|a, b| desc(a.queued).total_cmp(&desc(b.queued))),
        Sort::Age => ranks.sort_by(|a, b| {
            let t = |r: &Rank| r.last_stats.unwrap_or(f64::INFINITY);
            t(a).total_cmp(&t(b))
        }),
    }
}

fn cells(s: &Server, r: &Rank, now: f64, retr: &Retr) -> Vec<(Col, String, String, Style)> {
    let dim = r.is_idle();
    let st = if dim { Style::Dim } else { Style::Normal };
    let show = |v: Option<f64>| v.map_or("-".to_string(), num);
    // The tokens of the pool the share is of, named where the rank has several.
    let (used, capacity, pool) = r.kv_tokens();
    let tokens = match (used, capacity) {
        (Some(u), Some(c)) => format!("{}/{}", num(u), num(c)),
        (None, Some(c)) => format!("-/{}", num(c)),
        (Some(u), None) => num(u),
        (None, None) => "-".into(),
    };
    let tokens = match pool {
        Some(p) => format!("{p} {tokens}"),
        None => tokens,
    };
    let (mut pd, mut pd_short) = (Vec::new(), Vec::new());
    for (name, v) in [
        ("pre", r.prealloc),
        ("xfer", r.transfer),
        ("boot", r.bootstrap),
        ("infl", r.inflight),
    ] {
        if let Some(v) = v {
            pd.push(format!("{name} {}", num(v)));
            pd_short.push(format!("{}{}", &name[..1], num(v)));
        }
    }
    let pd = match pd.is_empty() {
        true => ("-".to_string(), "-".to_string()),
        false => (pd.join(" "), pd_short.join(" ")),
    };
    let retractions = retr.of(s, r);
    let age_text = match (r.api_live, r.last_stats, dim) {
        _ if r.is_live() => "live (API)".into(),
        (Some(_), ..) => "API down".into(),
        (None, Some(t), true) => format!("{} idle", age(now - t)),
        (None, Some(t), false) => age(now - t),
        (None, None, _) => "-".into(),
    };
    let retr_style = match retractions {
        Some(n) if n > 0.0 => Style::Warn,
        _ => st,
    };
    let same = |c: Col, text: String, style: Style| (c, text.clone(), text, style);
    vec![
        same(Col::Rank, format!("  {}", r.shown), st),
        same(Col::Tokens, tokens, st),
        same(Col::Run, show(r.running), st),
        same(Col::Queue, show(r.queued), st),
        same(Col::Gen, show(r.gen_throughput), st),
        same(Col::Input, show(r.input_throughput), st),
        (Col::Pd, pd.0, pd.1, st),
        same(Col::Retr, show(retractions), retr_style),
        same(Col::Age, age_text, st),
    ]
}

fn row_line(row: &Row, widths: &[(Col, usize)], gap: usize, kv_w: usize, short: bool) -> Line {
    let mut l = Line::new();
    for (i, &(c, w)) in widths.iter().enumerate() {
        if c == Col::Kv {
            kv_cell(&mut l, row.rank, kv_w);
        } else if let Some((_, long, brief, style)) = row.cells.iter().find(|x| x.0 == c) {
            let text = if short { brief } else { long };
            let text = if right(c) {
                rpad(text, w)
            } else {
                pad(text, w)
            };
            l.push(text, *style);
        }
        if i + 1 < widths.len() {
            l.push(" ".repeat(gap), Style::Normal);
        }
    }
    l
}

/// `[|||||      ]  45.2%` in `width` columns; blank bar and `-` without a usage.
fn kv_cell(l: &mut Line, r: &Rank, width: usize) {
    let bw = width - 7;
    match r.kv_fraction() {
        Some(f) => {
            l.push(bar(f, bw), if r.is_idle() { Style::Dim } else { level(f) });
            l.push(rpad(&percent(f), 7), Style::Normal);
        }
        None => {
            l.push(bar(0.0, bw), Style::Dim);
            l.push(rpad("-", 7), Style::Dim);
        }
    }
}

fn group_line(s: &Server) -> Line {
    let mut l = Line::new().with(s.name.clone(), Style::Title);
    let mut facts = Vec::new();
    if !s.engine_type.is_empty() {
        facts.push(s.engine_type.clone());
    }
    if !s.model_name.is_empty() {
        facts.push(s.model_name.clone());
    }
    if !s.instance.is_empty() {
        facts.push(format!("@ {}", s.instance));
    }
    // Where its values come from, since when (UTC time of day); where its API is polled.
    if let (from @ ("log" | "api" | "both"), Some(t)) = (s.values_from.as_str(), s.values_since) {
        let t = t.max(0.0) as u64 % 86_400;
        let since = format!("{:02}:{:02}:{:02}Z", t / 3600, t / 60 % 60, t % 60);
        facts.push(match from {
            "log" => format!("log since {since}"),
            "api" => format!("API since {since}"),
            _ => format!("log + API since {since}"),
        });
        if from != "log" && !s.url.is_empty() {
            facts.push(s.url.clone());
        }
    }
    if !facts.is_empty() {
        l.push(format!("  {}", facts.join(" · ")), Style::Dim);
    }
    l
}

fn gpu_table(m: &Model, width: usize) -> Vec<Line> {
    let idx = |g: &Gpu| match g.instance.as_str() {
        "" => g.index.clone(),
        i => format!("{i}/{}", g.index),
    };
    let mem: Vec<String> = m
        .gpus
        .iter()
        .map(|g| match (g.used, g.total) {
            (Some(u), Some(t)) => format!("{}/{} GiB", gib(u), gib(t)),
            _ => "-".into(),
        })
        .collect();
    let kv: Vec<String> = m
        .gpus
        .iter()
        .map(|g| match (g.kv_pool_bytes, g.total) {
            (Some(b), Some(t)) if t > 0.0 => format!("{} GiB {}", gib(b), percent(b / t)),
            (Some(b), _) => format!("{} GiB", gib(b)),
            _ => "-".into(),
        })
        .collect();
    let most = |v: &[String], min: usize| {
        v.iter()
            .map(|s| s.chars().count())
            .max()
            .unwrap_or(0)
            .max(min)
    };
    let ids: Vec<String> = m.gpus.iter().map(idx).collect();
    let w = GpuWidths {
        id: most(&ids, 3),
        bar: (width / 5).clamp(KV_BAR.0, 22),
        mem: most(&mem, 10),
        kv: most(&kv, 7),
    };
    let head = format!(
        "{}  {}  {}  {}  RANKS · NAME",
        pad("GPU", w.id),
        pad("MEMORY", w.bar + 7),
        pad("USED/TOTAL", w.mem),
        pad("KV POOL", w.kv)
    );
    let mut out = vec![Line::new().with(pad(&head, width), Style::Head)];
    for (i, g) in m.gpus.iter().enumerate() {
        out.push(gpu_line(g, &ids[i], &mem[i], &kv[i], &w));
    }
    out
}

/// Column widths of the GPU table.
struct GpuWidths {
    id: usize,
    bar: usize,
    mem: usize,
    kv: usize,
}

fn gpu_line(g: &Gpu, id: &str, mem: &str, kv: &str, w: &GpuWidths) -> Line {
    let mut l = Line::new().with(format!("{}  ", pad(id, w.id)), Style::Normal);
    let frac = match (g.used, g.total) {
        (Some(u), Some(t)) if t > 0.0 => Some(u / t),
        _ => None,
    };
    l.push(
        bar(frac.unwrap_or(0.0), w.bar),
        frac.map_or(Style::Dim, level),
    );
    l.push(rpad(&frac.map_or("-".into(), percent), 7), Style::Normal);
    l.push(
        format!("  {}  {}  ", pad(mem, w.mem), pad(kv, w.kv)),
        Style::Normal,
    );
    let ranks = match g.ranks.is_empty() {
        true => "-".to_string(),
        false => g.ranks.join(", "),
    };
    l.push(ranks, Style::Normal);
    if !g.name.is_empty() {
        l.push(format!(" · {}", g.name), Style::Dim);
    }
    l
}

fn footer(opts: &Opts, width: usize, scroll: usize, below: usize) -> Line {
    let mut right = String::new();
    if scroll > 0 || below > 0 {
        right.push_str(&format!("{scroll} above, {below} below · "));
    }
    right.push_str(&format!("every {}", opts.refresh));
    let right = cut(&right, width);
    let mut l = Line::new();
    for (key, what) in [
        ("q", " quit  ".to_string()),
        ("s", format!(" sort: {}  ", opts.sort.name())),
        (
            "g",
            format!(" GPUs: {}  ", if opts.gpus { "on" } else { "off" }),
        ),
        ("?", " help  ".to_string()),
        ("↑↓", " scroll".to_string()),
    ] {
        l.push(key, Style::Key);
        l.push(what, Style::Dim);
    }
    // The scroll position wins over the key names on a narrow screen.
    let keys_room = width.saturating_sub(right.chars().count() + 1);
    let mut l = l.truncated(keys_room);
    let fill = width.saturating_sub(l.width() + right.chars().count());
    l.push(" ".repeat(fill), Style::Normal);
    l.push(right, Style::Dim);
    l
}

fn help() -> Vec<Line> {
    let key = |k: &str, what: &str| {
        Line::new()
            .with(format!("  {}", pad(k, 16)), Style::Key)
            .with(what.to_string(), Style::Normal)
    };
    let col = |k: &str, what: &str| {
        Line::new()
            .with(format!("  {}", pad(k, 16)), Style::Head)
            .with(what.to_string(), Style::Normal)
    };
    vec![
        Line::new().with("Keys", Style::Title),
        key("q Esc Ctrl-C", "quit"),
        key(
            "s",
            "sort each server's ranks: by rank, KV use, queue, age of the last stats line",
        ),
        key("g", "show or hide the GPUs"),
        key("↑ ↓ PgUp PgDn", "scroll; Home: back to the top"),
        key("?", "this help; any key returns"),
        Line::new(),
        Line::new().with("Columns", Style::Title),
        col(
            "KV CACHE",
            "KV-cache use: used / capacity tokens (token usage where one is missing); hybrid SWA: the fuller pool, each against its own capacity",
        ),
        col(
            "USED/CAP",
            "sglang:num_used_tokens / sglang:max_total_num_tokens (or the pool's capacity); hybrid SWA: the fuller pool's, named (full, swa; max: only SGLang's larger-pool figures known)",
        ),
        col("RUN QUEUE", "running and queued requests"),
        col(
            "GEN IN t/s",
            "generation and prefill input throughput, tokens per second",
        ),
        col(
            "PD QUEUES",
            "PD: pre(alloc) and xfer (transfer) on decode, boot(strap) and infl(ight) on prefill",
        ),
        col(
            "RETR/1m",
            "retractions (KV cache full) in the last minute; RETR: total (--snapshot)",
        ),
        col(
            "AGE",
            "since the rank's last stats line; idle: none for --idle-after, activity reads 0; live (API): values from --sglang.url, API down: it does not answer",
        ),
        col(
            "GPU",
            "memory used / total, the KV pools on it and their share, the ranks it serves",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::Kind;

    fn families(ranks: u32) -> Vec<Family> {
        let mut used = Family::new("sglang:num_used_tokens", "h", Kind::Gauge);
        let mut cap = Family::new("sglang:max_total_num_tokens", "h", Kind::Gauge);
        for dp in 0..ranks {
            let l = vec![
                ("server", "d".to_string()),
                ("dp_rank", dp.to_string()),
                ("tp_rank", dp.to_string()),
            ];
            used.push(l.clone(), f64::from(dp) * 10.0);
            cap.push(l, 100.0);
        }
        vec![used, cap]
    }

    #[test]
    fn frames_fit_the_screen_and_scroll() {
        let fams = families(20);
        let mut o = Opts::default();
        let f = build(&fams, 0.0, 50, 12, &o, None);
        assert_eq!(f.lines.len(), 12);
        assert!(f.lines.iter().all(|l| l.width() <= 50));
        let text = f.to_plain();
        assert!(text.contains("  DP0 TP0"), "{text}");
        assert!(!text.contains("DP19 TP19"), "{text}");
        // 21 body lines (the group line and 20 ranks), 6 shown.
        assert_eq!(f.scroll_max, 15);
        assert!(
            f.lines[11].text().ends_with("0 above, 15 below · every 1s"),
            "{text}"
        );
        o.scroll = 99;
        let text = build(&fams, 0.0, 50, 12, &o, None).to_plain();
        assert!(
            text.contains("DP19 TP19") && !text.contains("DP0 TP0"),
            "{text}"
        );
        // A snapshot has every row and no footer.
        o.snapshot = true;
        let text = build(&fams, 0.0, 50, 12, &o, None).to_plain();
        assert!(text.contains("DP0 TP0") && text.contains("DP19 TP19") && !text.contains("quit"));
    }

    /// Token usage without used tokens or capacity: the rows show it, and so does the header
    /// (the fullest rank), never `KV -` above rows with percentages.
    #[test]
    fn header_and_rows_agree_without_capacity() {
        let mut usage = Family::new("sglang:token_usage", "h", Kind::Gauge);
        for (tp, u) in [("0", 0.25), ("1", 0.5)] {
            usage.push(vec![("server", "d".into()), ("tp_rank", tp.into())], u);
        }
        let o = Opts {
            snapshot: true,
            ..Opts::default()
        };
        let text = build(&[usage], 0.0, 100, 30, &o, None).to_plain();
        assert!(text.contains("  KV max 50.0%  "), "{text}");
        assert!(text.contains(" 25.0%") && text.contains(" 50.0%"), "{text}");
        // With used tokens and capacity on every rank with a share: the exact total, as before.
        let text = build(&families(3), 0.0, 100, 30, &o, None).to_plain();
        assert!(text.contains("  KV 10.0% 30/300  "), "{text}");
    }

    #[test]
    fn sorting_and_the_help() {
        let fams = families(3);
        let o = Opts {
            sort: Sort::Kv,
            snapshot: true,
            ..Opts::default()
        };
        let text = build(&fams, 0.0, 100, 30, &o, None).to_plain();
        let at = |s: &str| text.find(s).unwrap();
        assert!(
            at("DP2 TP2") < at("DP1 TP1") && at("DP1 TP1") < at("DP0 TP0"),
            "{text}"
        );
        assert!(text.contains(" 20.0%"), "{text}");
        let help = Opts {
            help: true,
            ..Opts::default()
        };
        let text = build(&fams, 0.0, 100, 30, &help, None).to_plain();
        assert!(text.contains("Keys") && !text.contains("DP0 TP0"), "{text}");
    }
}
