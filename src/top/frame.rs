//! What `top` draws, independent of the terminal: lines of styled text spans, rendered as plain
//! text (`--snapshot`, tests) or by the terminal view (colours, when the terminal has them).

/// The meaning of a span; the terminal view maps it to a colour, plain text ignores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    /// Ordinary text.
    #[default]
    Normal,
    /// The title line and server group headers.
    Title,
    /// Column headers.
    Head,
    /// Less important text: idle ranks, units, hints.
    Dim,
    /// A bar or value in its comfortable range.
    Good,
    /// A bar or value getting high (or a stats line getting old).
    Warn,
    /// A bar or value at its limit, or an error.
    Bad,
    /// Key names in the footer and help.
    Key,
}

/// A run of text with one style.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// The text (no newlines).
    pub text: String,
    /// How it is shown.
    pub style: Style,
}

/// One screen line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Line(pub Vec<Span>);

impl Line {
    /// An empty line.
    pub fn new() -> Line {
        Line(Vec::new())
    }

    /// Appends `text` in `style`; returns `self` for chaining.
    pub fn with(mut self, text: impl Into<String>, style: Style) -> Line {
        self.push(text, style);
        self
    }

    /// Appends `text` in `style`, its control, bidi and zero-width characters written escaped
    /// (names from the input reach the terminal: repro 27).
    pub fn push(&mut self, text: impl Into<String>, style: Style) {
        let mut text = text.into();
        if let std::borrow::Cow::Owned(t) = crate::logging::escape_controls(&text) {
            text = t;
        }
        if !text.is_empty() {
            self.0.push(Span { text, style });
        }
    }

    /// Width in terminal columns (characters; `top` writes single-width text).
    pub fn width(&self) -> usize {
        self.0.iter().map(|s| s.text.chars().count()).sum()
    }

    /// The line cut to `width` columns (the last kept character becomes `…` when cut).
    pub fn truncated(self, width: usize) -> Line {
        if self.width() <= width {
            return self;
        }
        let mut left = width.saturating_sub(1);
        let mut out = Line::new();
        let mut last = Style::Normal;
        for s in self.0 {
            if left == 0 {
                break;
            }
            let t: String = s.text.chars().take(left).collect();
            left -= t.chars().count();
            last = s.style;
            out.push(t, s.style);
        }
        if width > 0 {
            out.push("…", last);
        }
        out
    }

    /// The text without styles.
    pub fn text(&self) -> String {
        self.0.iter().map(|s| s.text.as_str()).collect()
    }
}

/// A whole screen: at most the height it was built for, each line at most its width.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Frame {
    /// The lines, top to bottom.
    pub lines: Vec<Line>,
    /// How far the body can scroll (lines below the screen when scrolled to the top).
    pub scroll_max: usize,
}

impl Frame {
    /// Plain text: one line per screen line, trailing blanks removed, no escape codes.
    pub fn to_plain(&self) -> String {
        let mut out = String::new();
        for l in &self.lines {
            out.push_str(l.text().trim_end());
            out.push('\n');
        }
        out
    }
}

/// `s` cut to `width` characters, ending in `…` when it was longer.
pub fn cut(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut t: String = s.chars().take(width - 1).collect();
    t.push('…');
    t
}

/// `s` padded with spaces to `width` (left-aligned), or cut to it.
pub fn pad(s: &str, width: usize) -> String {
    let s = cut(s, width);
    let n = s.chars().count();
    format!("{s}{}", " ".repeat(width - n))
}

/// `s` right-aligned in `width`, or cut to it.
pub fn rpad(s: &str, width: usize) -> String {
    let s = cut(s, width);
    let n = s.chars().count();
    format!("{}{s}", " ".repeat(width - n))
}

/// A count or rate in at most 6 characters: `0`, `12.5`, `1635`, `12.3k`, `786.4k`, `1.07M`.
pub fn num(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        return "-".into();
    }
    if a < 100.0 && v.fract() != 0.0 {
        format!("{v:.1}")
    } else if a < 10_000.0 {
        format!("{v:.0}")
    } else if a < 1e6 {
        format!("{:.1}k", v / 1e3)
    } else if a < 1e9 {
        format!("{:.2}M", v / 1e6)
    } else {
        format!("{:.2}G", v / 1e9)
    }
}

/// Bytes in GiB with one decimal: `79.6`.
pub fn gib(bytes: f64) -> String {
    format!("{:.1}", bytes / (1u64 << 30) as f64)
}

/// An age in seconds, short: `0s`, `45s`, `2m05s`, `1h02m`, `3d04h`.
pub fn age(secs: f64) -> String {
    let s = secs.max(0.0).floor() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// The style of a bar filled to `fraction`: good below 70 %, warning below 90 %, bad above.
pub fn level(fraction: f64) -> Style {
    if fraction >= 0.9 {
        Style::Bad
    } else if fraction >= 0.7 {
        Style::Warn
    } else {
        Style::Good
    }
}

/// A bar `[|||||     ]` of `width` characters (brackets included) filled to `fraction` (0-1);
/// at least one `|` for any non-zero fraction.
pub fn bar(fraction: f64, width: usize) -> String {
    let inner = width.saturating_sub(2);
    let f = if fraction.is_finite() {
        fraction.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let mut n = (f * inner as f64).round() as usize;
    if f > 0.0 && n == 0 && inner > 0 {
        n = 1;
    }
    format!("[{}{}]", "|".repeat(n), " ".repeat(inner - n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_ages_and_bars() {
        assert_eq!(num(0.0), "0");
        assert_eq!(num(12.5), "12.5");
        assert_eq!(num(1635.11), "1635");
        assert_eq!(num(11179.0), "11.2k");
        assert_eq!(num(786_432.0), "786.4k");
        assert_eq!(num(1_070_080.0), "1.07M");
        assert_eq!(age(0.4), "0s");
        assert_eq!(age(125.0), "2m05s");
        assert_eq!(age(3720.0), "1h02m");
        assert_eq!(age(3.0 * 86_400.0 + 4.0 * 3600.0), "3d04h");
        assert_eq!(bar(0.5, 12), "[|||||     ]");
        assert_eq!(bar(0.001, 7), "[|    ]");
        assert_eq!(bar(0.0, 4), "[  ]");
        assert_eq!(bar(2.0, 4), "[||]");
    }

    #[test]
    fn lines_are_cut_with_an_ellipsis() {
        let l = Line::new()
            .with("abc", Style::Title)
            .with("defgh", Style::Normal);
        assert_eq!(l.clone().truncated(5).text(), "abcd…");
        assert_eq!(l.clone().truncated(8).text(), "abcdefgh");
        assert_eq!(pad("ab", 4), "ab  ");
        assert_eq!(rpad("ab", 4), "  ab");
        assert_eq!(cut("abcdef", 3), "ab…");
    }
}
