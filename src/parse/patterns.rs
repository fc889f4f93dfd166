//! The pattern file (`patterns/sglang.yaml`): loading, validation and compilation.
//!
//! The file is data, embedded in the binary and replaceable with `--patterns FILE`. It is read
//! and compiled once at start-up; a bad file is a [`PatternError`] (exit status 2 from the CLI),
//! never a panic.

use std::collections::HashMap;

use super::unread::Unread;
use aho_corasick::AhoCorasick;
use regex::Regex;
use serde::Deserialize;

pub use crate::record::{Class, MetricId, RankTag};

/// The pattern file shipped with the binary.
pub const EMBEDDED: &str = include_str!("../../patterns/sglang.yaml");

/// A broken pattern file. Every variant names what is wrong in words an operator can act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PatternError {
    /// The file could not be read.
    #[error("cannot read patterns file {path}: {source}")]
    Read {
        /// The path given with `--patterns`.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The YAML is not valid or does not have the expected shape.
    #[error("patterns file is not valid: {0}")]
    Yaml(#[from] serde_norway::Error),
    /// A regex does not compile.
    #[error("patterns file: regex of {what} does not compile: {source}")]
    Regex {
        /// Which entry holds the regex.
        what: String,
        /// The compile error.
        source: regex::Error,
    },
    /// A reference or value is inconsistent (unknown metric id, unknown class, …).
    #[error("patterns file: {0}")]
    Invalid(String),
}

/// Whether a metric is per rank or shared by every rank of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// One value per rank (the default).
    #[default]
    Rank,
    /// One value per server, shown on every rank (the capacity line is printed by rank 0 only).
    Server,
}

/// Whose figures a startup line gives when a rank runs two model runners (a target and a
/// speculative-decoding draft model, each loading its weights and building its own KV pools).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Runner {
    /// The runner that loaded its weights last on the rank (the default): a pool line both
    /// runners print in the same words (`KV Cache is allocated`: a draft model never names
    /// itself there) is told apart by order (`src/state/draft.rs`).
    #[default]
    Latest,
    /// Always the target model's: a line printed for the target's pool even after the draft
    /// loaded (v0.5.17+ `Post-capture KV sizing: ...`, printed once both runners captured).
    Target,
}

/// Prometheus metric type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricKind {
    /// A value that goes up and down; the last line wins.
    Gauge,
    /// A running sum of line values.
    Counter,
}

impl From<MetricKind> for crate::family::Kind {
    /// The exposition type of a pattern-file metric.
    fn from(k: MetricKind) -> Self {
        match k {
            MetricKind::Gauge => crate::family::Kind::Gauge,
            MetricKind::Counter => crate::family::Kind::Counter,
        }
    }
}

/// One exported metric, from the `metrics:` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricDef {
    /// The exposition name, e.g. `sglang:token_usage`.
    pub name: String,
    /// Gauge or counter.
    pub kind: MetricKind,
    /// The HELP text: one sentence with the unit.
    pub help: String,
    /// Reads 0 while the rank is idle (see `--idle-after`).
    #[serde(default)]
    pub activity: bool,
    /// Per rank or per server.
    #[serde(default)]
    pub scope: Scope,
    /// An alias: the value of the first of these metrics (ids) that has one, times `scale`.
    /// Publishes a metric under a second name and unit (SGLang's own, e.g. GB where ours are
    /// bytes) without a second field mapping. Aliases of aliases are refused.
    #[serde(default, deserialize_with = "one_or_many")]
    pub from: Vec<String>,
    /// Multiplier of an alias (default 1).
    pub scale: Option<f64>,
    /// The value a statistics line of the classes in `default_on` gives the metric when it does
    /// not print the field (SGLang's own metrics read 0 for a pool or feature the server lacks).
    pub default: Option<f64>,
    /// Line classes that apply `default`.
    #[serde(default)]
    pub default_on: Vec<Class>,
    /// The id used in the file (filled in after loading).
    #[serde(skip)]
    pub id: String,
    /// [`MetricDef::from`] resolved to metric ids (filled in after loading).
    #[serde(skip)]
    pub alias_of: Vec<MetricId>,
}

impl MetricDef {
    /// Whether the metric is an alias of others (see [`MetricDef::from`]).
    pub fn is_alias(&self) -> bool {
        !self.alias_of.is_empty()
    }
}

/// `from: x` or `from: [x, y]`.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FieldSpecRaw {
    metric: Option<String>,
    prefill: Option<String>,
    decode: Option<String>,
    #[serde(default)]
    ignore: bool,
    scale: Option<f64>,
    #[serde(default)]
    sum: bool,
    /// The value may hold a bracketed list with separators inside (`4.90 [4.70, 5.10]`).
    #[serde(default)]
    bracketed: bool,
    /// A negative value is a reading (a memory delta: `mem usage=-1.86 GB`), not a corrupt line.
    #[serde(default)]
    signed: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LineRaw {
    name: String,
    class: Class,
    literal: String,
    regex: String,
    #[serde(default)]
    scope: Scope,
    #[serde(default)]
    runner: Runner,
    #[serde(default)]
    whole_pool: bool,
    separators: Option<Vec<String>>,
    kv: Option<Vec<String>>,
    stop: Option<String>,
    #[serde(default)]
    requires: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRaw {
    prefix: String,
    rank_tags: HashMap<String, String>,
    lines: Vec<LineRaw>,
    fields: HashMap<String, FieldSpecRaw>,
    #[serde(default)]
    line_fields: HashMap<String, HashMap<String, FieldSpecRaw>>,
    metrics: indexmap_like::OrderedMap<MetricDef>,
    #[serde(default)]
    stream_prefixes: Vec<StreamPrefixRaw>,
}

/// One entry of `stream_prefixes:` as written in the pattern file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StreamPrefixRaw {
    name: String,
    regex: String,
    #[serde(default)]
    json: bool,
    #[serde(default)]
    columns: bool,
}

/// What a known field key turns into on one class of line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldTarget {
    /// A metric, with a multiplier and whether values of one line add up.
    Metric {
        /// The metric.
        id: MetricId,
        /// Multiplier applied to the number (GB to bytes).
        scale: f64,
        /// Add to an earlier value of the same line instead of replacing it.
        sum: bool,
        /// Negative values are readings (the field's `signed: true`); otherwise refused.
        signed: bool,
    },
    /// A key we know and do not export.
    Ignore,
}

/// One compiled line kind.
#[derive(Debug)]
pub struct LineKind {
    /// The name in the file, also the `kind` label of the self metrics.
    pub name: String,
    /// How the state applies it.
    pub class: Class,
    /// Per rank or per server (facts only).
    pub scope: Scope,
    /// Whose figures the line gives on a rank with a draft model (startup facts only).
    pub runner: Runner,
    /// The line's KV size is the rank's whole KV pool: on a hybrid SWA model, its full-attention
    /// and sliding-window pools together (v0.5.17+ `Post-capture KV sizing: KV cache
    /// allocated.`, `post_capture_backed_bytes`), never the full-attention pool's alone (see
    /// `src/state/draft.rs`).
    pub whole_pool: bool,
    /// The compiled regex.
    pub regex: Regex,
    /// The regex treats the ten ASCII digits alike (see [`digits_alike`]).
    pub digits_alike: bool,
    /// Field separators (default `, `).
    pub separators: Vec<String>,
    /// Key/value separators (default `: `).
    pub kv: Vec<String>,
    /// Named groups that are field keys: (group index, target).
    pub group_fields: Vec<(usize, FieldTarget)>,
    /// Index of the `fields` group, if any.
    pub fields_group: Option<usize>,
    /// Fields end where this text begins (the v0.1.17 capacity line runs into a
    /// `server_args: …` dump).
    pub stop: Option<String>,
    /// Field keys of which the line must carry at least one to be of this kind (empty: none
    /// required). A line that only shares the label (sglang-jax's `Prefill batch. #bid: N,
    /// #cache_miss: N` companion line) is then not counted as one.
    pub requires: Vec<String>,
    /// Per-line overrides of [`Patterns::field`], by key.
    overrides: HashMap<String, FieldTarget>,
}

/// The compiled pattern set. Built once; shared read-only by every source thread.
#[derive(Debug)]
pub struct Patterns {
    /// The prefix regex (groups `date`, `time`, `frac`, `tags`).
    pub prefix: Regex,
    /// Rank tag names (`DP`, `ATTN_CP`, …) to the rank they set.
    pub rank_tags: Vec<(String, RankTag)>,
    /// Line kinds, in match order.
    pub lines: Vec<LineKind>,
    /// Exported metrics; [`MetricId`] indexes this.
    pub metrics: Vec<MetricDef>,
    /// The literal prefilter over every line kind's literal (deduplicated).
    pub prefilter: AhoCorasick,
    /// The prefilter literal of each line kind.
    pub kind_literal: Vec<usize>,
    /// The distinct literals, indexed as the prefilter's patterns.
    pub literals: Vec<String>,
    /// Field keys whose value may be a bracketed list with separators inside.
    pub bracketed: Vec<String>,
    /// No literal holds an ASCII digit and every line kind's regex treats the ten digits alike:
    /// two lines that differ only in digits hold the same literals and match the same kinds at
    /// the same places (the parser's shape memo relies on it).
    pub digits_alike: bool,
    /// The prefix regex treats the ten digits alike.
    pub prefix_digits_alike: bool,
    /// What other tools write before SGLang's line (see [`super::stream`]).
    pub streams: super::stream::StreamPrefixes,
    fields_prefill: HashMap<String, FieldTarget>,
    fields_decode: HashMap<String, FieldTarget>,
    fields_other: HashMap<String, FieldTarget>,
    /// What every parser of these patterns searches with, compiled once (see
    /// [`super::Prebuilt`]): a parser per followed file must not compile its own regexes.
    pub(super) prebuilt: std::sync::OnceLock<super::Prebuilt>,
    /// The shapes of SGLang's lines no kind read (see [`super::unread`]), built once.
    pub(super) unread: std::sync::OnceLock<Unread>,
}

mod indexmap_like {
    //! A YAML mapping read in file order (serde's HashMap would lose the order, and the
    //! exposition lists metrics in the order the file gives).
    use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
    use std::fmt;
    use std::marker::PhantomData;

    #[derive(Debug)]
    pub struct OrderedMap<V>(pub Vec<(String, V)>);

    impl<'de, V: Deserialize<'de>> Deserialize<'de> for OrderedMap<V> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V2<V>(PhantomData<V>);
            impl<'de, V: Deserialize<'de>> Visitor<'de> for V2<V> {
                type Value = OrderedMap<V>;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a mapping")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                    let mut out = Vec::new();
                    while let Some((k, v)) = m.next_entry::<String, V>()? {
                        out.push((k, v));
                    }
                    Ok(OrderedMap(out))
                }
            }
            d.deserialize_map(V2(PhantomData))
        }
    }
}

const SPECIAL_GROUPS: [&str; 6] = ["fields", "method", "path", "status", "port", "dp"];

impl Patterns {
    /// Compiles the embedded pattern file. It is tested, so this cannot fail in a release.
    pub fn embedded() -> Result<Patterns, PatternError> {
        Patterns::from_yaml(EMBEDDED)
    }

    /// Reads and compiles a pattern file given with `--patterns`.
    ///
    /// # Errors
    /// [`PatternError`] when the file cannot be read, is not valid YAML of the expected shape,
    /// has a regex that does not compile or refers to an undefined metric.
    pub fn from_file(path: &std::path::Path) -> Result<Patterns, PatternError> {
        let text =
            crate::optfile::read_text(path, crate::optfile::Kind::Config).map_err(|source| {
                PatternError::Read {
                    path: path.display().to_string(),
                    source,
                }
            })?;
        Patterns::from_yaml(&text)
    }

    /// Compiles a pattern file from its YAML text.
    ///
    /// # Errors
    /// See [`Patterns::from_file`].
    pub fn from_yaml(text: &str) -> Result<Patterns, PatternError> {
        let raw: FileRaw = serde_norway::from_str(text)?;
        let (metrics, metric_ids) = compile_metrics(raw.metrics)?;
        let fields = FieldMaps::compile(&raw.fields, &metric_ids)?;
        let rank_tags = compile_rank_tags(&raw.rank_tags)?;
        let mut lines = Vec::new();
        let mut literals: Vec<String> = Vec::new();
        let mut kind_literal: Vec<usize> = Vec::new();
        for l in raw.lines {
            let literal = l.literal.clone();
            let kind = compile_line(l, &raw.line_fields, &metric_ids, &fields)?;
            match literals.iter().position(|x| *x == literal) {
                Some(p) => kind_literal.push(p),
                None => {
                    kind_literal.push(literals.len());
                    literals.push(literal);
                }
            }
            lines.push(kind);
        }
        // The parser keeps one bit per literal in a u64 (which literals a line holds).
        if literals.len() > 64 {
            return Err(PatternError::Invalid(format!(
                "{} distinct literals; at most 64 are supported",
                literals.len()
            )));
        }
        let prefilter = AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::Standard)
            .build(&literals)
            .map_err(|e| PatternError::Invalid(format!("literal prefilter: {e}")))?;
        let (prefix, prefix_digits_alike) = compile_prefix(&raw.prefix)?;
        let streams = compile_streams(raw.stream_prefixes, &rank_tags)?;
        let digits_alike = lines.iter().all(|l: &LineKind| l.digits_alike)
            && literals
                .iter()
                .all(|l| !l.bytes().any(|b| b.is_ascii_digit()));
        let mut bracketed: Vec<String> = raw
            .fields
            .iter()
            .filter(|(_, f)| f.bracketed)
            .map(|(k, _)| k.clone())
            .collect();
        bracketed.sort();
        Ok(Patterns {
            prefix,
            rank_tags,
            lines,
            metrics,
            prefilter,
            kind_literal,
            literals,
            bracketed,
            digits_alike,
            prefix_digits_alike,
            streams,
            fields_prefill: fields.prefill,
            fields_decode: fields.decode,
            fields_other: fields.other,
            prebuilt: std::sync::OnceLock::new(),
            unread: std::sync::OnceLock::new(),
        })
    }

    /// The target of field `key` on a line of kind `line`, or `None` for an unknown key.
    pub fn field(&self, line: &LineKind, key: &str) -> Option<FieldTarget> {
        line.target(
            key,
            &self.fields_prefill,
            &self.fields_decode,
            &self.fields_other,
        )
    }

    /// Every field key of the file's `fields` (a key may be listed once per class).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.fields_prefill
            .keys()
            .chain(self.fields_decode.keys())
            .chain(self.fields_other.keys())
            .map(String::as_str)
    }

    /// Every field target of the file: the three classes' fields and each line kind's
    /// overrides (what a log line can give a metric: its scale, whether it may be negative).
    pub fn targets(&self) -> impl Iterator<Item = &FieldTarget> {
        let lines = self.lines.iter().flat_map(|l| l.overrides.values());
        self.fields_prefill
            .values()
            .chain(self.fields_decode.values())
            .chain(self.fields_other.values())
            .chain(lines)
    }

    /// The metric with exposition name `name`, if defined.
    pub fn metric_by_id(&self, id: &str) -> Option<MetricId> {
        self.metrics
            .iter()
            .position(|m| m.id == id)
            .map(|i| i as MetricId)
    }
}

impl LineKind {
    fn target(
        &self,
        key: &str,
        prefill: &HashMap<String, FieldTarget>,
        decode: &HashMap<String, FieldTarget>,
        other: &HashMap<String, FieldTarget>,
    ) -> Option<FieldTarget> {
        if let Some(t) = self.overrides.get(key) {
            return Some(*t);
        }
        match self.class {
            Class::Prefill => prefill.get(key),
            Class::Decode => decode.get(key),
            _ => other.get(key),
        }
        .copied()
    }
}

/// The `metrics:` section: definitions in file order and their ids by name.
fn compile_metrics(
    raw: indexmap_like::OrderedMap<MetricDef>,
) -> Result<(Vec<MetricDef>, HashMap<String, MetricId>), PatternError> {
    let mut metrics = Vec::new();
    // Every name the metrics so far write ([`crate::catalog::forms`]) → the metric's index.
    let mut written: HashMap<String, usize> = HashMap::new();
    let mut ids = HashMap::new();
    for (id, mut def) in raw.0 {
        if ids.insert(id.clone(), metrics.len() as MetricId).is_some() {
            return Err(PatternError::Invalid(format!(
                "metric {id} is defined twice"
            )));
        }
        if !valid_metric_name(&def.name) {
            return Err(PatternError::Invalid(format!(
                "metric {id}: {:?} is not a valid Prometheus metric name",
                def.name
            )));
        }
        // One name, one family: never another metric's, never one of the exporter's own, in
        // any name it writes (a histogram's `_bucket`/`_count`/`_sum`, a counter's OpenMetrics
        // name without `_total`), also once colons are underscores (`--web.names underscores`,
        // a Prometheus 2 under `upstream`, relabel rules): two that meet would be one family.
        let mine = crate::catalog::forms(&def.name, def.kind.into());
        if let Some(&i) = mine.iter().find_map(|f| written.get(f)) {
            let other: &MetricDef = &metrics[i];
            return Err(PatternError::Invalid(format!(
                "metric {id}: name {:?} is metric {}'s already ({:?}; each metric needs its own \
                 name, also once colons are underscores)",
                def.name, other.id, other.name
            )));
        }
        for f in mine {
            written.insert(f, metrics.len());
        }
        if let Some(own) = crate::catalog::taken_by(&def.name, def.kind.into()) {
            return Err(PatternError::Invalid(format!(
                "metric {id}: name {:?} meets a family of the exporter's own, {own}; pick another \
                 name",
                def.name
            )));
        }
        def.id = id;
        metrics.push(def);
    }
    if metrics.len() > MetricId::MAX as usize {
        return Err(PatternError::Invalid("too many metrics".into()));
    }
    resolve_aliases(&mut metrics, &ids)?;
    Ok((metrics, ids))
}

/// Resolves `from:` of the aliases, checking each source exists, is no alias itself and has
/// the alias's kind; and that a default has classes to apply to.
fn resolve_aliases(
    metrics: &mut [MetricDef],
    ids: &HashMap<String, MetricId>,
) -> Result<(), PatternError> {
    for i in 0..metrics.len() {
        let mut of = Vec::new();
        for src in &metrics[i].from {
            let def = &metrics[i];
            let Some(&j) = ids.get(src) else {
                return Err(PatternError::Invalid(format!(
                    "metric {}: from {src:?} is not a metric",
                    def.id
                )));
            };
            let source = &metrics[j as usize];
            if !source.from.is_empty() || source.kind != def.kind {
                return Err(PatternError::Invalid(format!(
                    "metric {}: from {src:?} must be a metric of the same kind that is no alias",
                    def.id
                )));
            }
            of.push(j);
        }
        let def = &mut metrics[i];
        if def.scale.is_some() && of.is_empty() {
            return Err(PatternError::Invalid(format!(
                "metric {}: scale is only for an alias (from:)",
                def.id
            )));
        }
        if def.default.is_some() == def.default_on.is_empty() {
            return Err(PatternError::Invalid(format!(
                "metric {}: default and default_on go together",
                def.id
            )));
        }
        def.alias_of = of;
    }
    Ok(())
}

/// The target of a field spec naming metric `name` (`None`: the spec names none for this class).
fn resolve(
    key: &str,
    name: Option<&String>,
    spec: &FieldSpecRaw,
    ids: &HashMap<String, MetricId>,
) -> Result<Option<FieldTarget>, PatternError> {
    if spec.ignore {
        return Ok(Some(FieldTarget::Ignore));
    }
    let Some(n) = name else {
        return Ok(None);
    };
    let id = ids.get(n.as_str()).ok_or_else(|| {
        PatternError::Invalid(format!("field {key:?} refers to undefined metric {n:?}"))
    })?;
    let scale = spec.scale.unwrap_or(1.0);
    if !(scale.is_finite() && scale > 0.0) {
        return Err(PatternError::Invalid(format!(
            "field {key:?}: scale must be a positive number"
        )));
    }
    Ok(Some(FieldTarget::Metric {
        id: *id,
        scale,
        sum: spec.sum,
        signed: spec.signed,
    }))
}

/// The `fields:` section, by line class.
struct FieldMaps {
    prefill: HashMap<String, FieldTarget>,
    decode: HashMap<String, FieldTarget>,
    other: HashMap<String, FieldTarget>,
}

impl FieldMaps {
    fn compile(
        raw: &HashMap<String, FieldSpecRaw>,
        ids: &HashMap<String, MetricId>,
    ) -> Result<FieldMaps, PatternError> {
        let mut m = FieldMaps {
            prefill: HashMap::new(),
            decode: HashMap::new(),
            other: HashMap::new(),
        };
        for (key, spec) in raw {
            let any = resolve(key, spec.metric.as_ref(), spec, ids)?;
            let p = resolve(key, spec.prefill.as_ref(), spec, ids)?.or(any);
            let d = resolve(key, spec.decode.as_ref(), spec, ids)?.or(any);
            if any.is_none() && p.is_none() && d.is_none() {
                return Err(PatternError::Invalid(format!(
                    "field {key:?} names no metric and is not ignored"
                )));
            }
            for (map, t) in [(&mut m.prefill, p), (&mut m.decode, d), (&mut m.other, any)] {
                if let Some(t) = t {
                    map.insert(key.clone(), t);
                }
            }
        }
        Ok(m)
    }
}

/// The `rank_tags:` section, longest tag first so `MOE_DP` is tried before `DP`.
fn compile_rank_tags(
    raw: &HashMap<String, String>,
) -> Result<Vec<(String, RankTag)>, PatternError> {
    let mut tags = Vec::new();
    for (tag, rank) in raw {
        let r = match rank.as_str() {
            "dp" => RankTag::Dp,
            "pp" => RankTag::Pp,
            "attn_cp" => RankTag::AttnCp,
            "moe_dp" => RankTag::MoeDp,
            "tp" => RankTag::Tp,
            "ep" => RankTag::Ep,
            other => {
                return Err(PatternError::Invalid(format!(
                    "rank tag {tag}: unknown rank {other:?} (dp, pp, attn_cp, moe_dp, tp, ep)"
                )))
            }
        };
        if tag.is_empty() || !tag.bytes().all(|c| c.is_ascii_uppercase() || c == b'_') {
            return Err(PatternError::Invalid(format!(
                "rank tag {tag:?}: use upper-case letters and _ only"
            )));
        }
        tags.push((tag.clone(), r));
    }
    tags.sort_by_key(|(t, _)| std::cmp::Reverse(t.len()));
    Ok(tags)
}

/// Compiles a regex of the pattern file, refusing one that reads digits beyond ASCII (`\d` is
/// Unicode in the regex crate: `٦` would match, then fail or mislead every reader after it).
/// With it, whether it treats the ten ASCII digits alike ([`digits_alike`]).
fn compile_regex(what: &str, re: &str) -> Result<(Regex, bool), PatternError> {
    let regex = Regex::new(re).map_err(|source| PatternError::Regex {
        what: what.to_string(),
        source,
    })?;
    let hir = regex_syntax::Parser::new()
        .parse(re)
        .map_err(|e| PatternError::Invalid(format!("regex of {what}: {e}")))?;
    if reads_unicode_digits(&hir) {
        return Err(PatternError::Invalid(format!(
            "regex of {what}: \\d matches every Unicode digit; write [0-9]"
        )));
    }
    Ok((regex, digits_alike(&hir)))
}

/// Whether a class in `hir` is a digit class wider than ASCII: it holds `0`-`9` and the
/// Arabic-Indic digits but no letter (a negated class like `[^ "]` holds letters too).
fn reads_unicode_digits(hir: &regex_syntax::hir::Hir) -> bool {
    use regex_syntax::hir::{Class as C, HirKind};
    match hir.kind() {
        HirKind::Class(C::Unicode(c)) => {
            let has = |ch: char| c.ranges().iter().any(|r| r.start() <= ch && ch <= r.end());
            has('0') && has('9') && has('\u{0666}') && !has('a')
        }
        HirKind::Class(C::Bytes(_)) | HirKind::Empty | HirKind::Literal(_) | HirKind::Look(_) => {
            false
        }
        HirKind::Repetition(r) => reads_unicode_digits(&r.sub),
        HirKind::Capture(c) => reads_unicode_digits(&c.sub),
        HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().any(reads_unicode_digits),
    }
}

/// Whether `hir` treats the ten ASCII digits alike: every class holds all of them or none, and
/// no literal holds one. Such a regex cannot tell one digit from another, so it matches two texts
/// that differ only in digits at the same places with the same groups.
pub(super) fn digits_alike(hir: &regex_syntax::hir::Hir) -> bool {
    use regex_syntax::hir::{Class as C, HirKind};
    fn all_or_none(n: usize) -> bool {
        n == 0 || n == 10
    }
    match hir.kind() {
        // A word boundary counts every digit as a word character.
        HirKind::Empty | HirKind::Look(_) => true,
        HirKind::Literal(l) => !l.0.iter().any(u8::is_ascii_digit),
        HirKind::Class(C::Unicode(c)) => all_or_none(
            ('0'..='9')
                .filter(|&d| c.ranges().iter().any(|r| r.start() <= d && d <= r.end()))
                .count(),
        ),
        HirKind::Class(C::Bytes(c)) => all_or_none(
            (b'0'..=b'9')
                .filter(|&d| c.ranges().iter().any(|r| r.start() <= d && d <= r.end()))
                .count(),
        ),
        HirKind::Repetition(r) => digits_alike(&r.sub),
        HirKind::Capture(c) => digits_alike(&c.sub),
        HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().all(digits_alike),
    }
}

/// The sub-expression of the capture group `name`, if `hir` has one.
fn group<'h>(hir: &'h regex_syntax::hir::Hir, name: &str) -> Option<&'h regex_syntax::hir::Hir> {
    use regex_syntax::hir::HirKind;
    match hir.kind() {
        HirKind::Capture(c) if c.name.as_deref() == Some(name) => Some(&c.sub),
        HirKind::Capture(c) => group(&c.sub, name),
        HirKind::Repetition(r) => group(&r.sub, name),
        HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().find_map(|h| group(h, name)),
        _ => None,
    }
}

/// The prefix regex, with the shapes its reader relies on: `time` is exactly 8 bytes
/// (`HH:MM:SS`), `date` exactly 10 (`YYYY-MM-DD`), `frac` 1 to 9. A custom prefix that lets
/// `time` be `9:05:00` is refused here rather than misread later. (The reader checks each byte
/// too; this makes the mistake visible at start-up.)
fn compile_prefix(re: &str) -> Result<(Regex, bool), PatternError> {
    let prefix = compile_regex("prefix", re)?;
    let hir = regex_syntax::Parser::new()
        .parse(re)
        .map_err(|e| PatternError::Invalid(format!("prefix: {e}")))?;
    let Some(time) = group(&hir, "time") else {
        return Err(PatternError::Invalid(
            "prefix: the regex needs a group named time".into(),
        ));
    };
    for (name, min, max) in [("time", 8, 8), ("date", 10, 10), ("frac", 1, 9)] {
        let Some(g) = (if name == "time" {
            Some(time)
        } else {
            group(&hir, name)
        }) else {
            continue;
        };
        let p = g.properties();
        if p.minimum_len() != Some(min) || p.maximum_len().is_none_or(|m| m > max) {
            return Err(PatternError::Invalid(format!(
                "prefix: group {name} must match {min} to {max} ASCII characters (it allows {:?} to {:?} bytes)",
                p.minimum_len(),
                p.maximum_len()
            )));
        }
    }
    Ok(prefix)
}

/// The `stream_prefixes:` section, each regex anchored at the start of the line.
fn compile_streams(
    raw: Vec<StreamPrefixRaw>,
    rank_tags: &[(String, RankTag)],
) -> Result<super::stream::StreamPrefixes, PatternError> {
    let mut entries = Vec::new();
    for r in raw {
        let what = format!("stream prefix {}", r.name);
        let anchored = format!("^(?:{})", r.regex);
        let (regex, _) = compile_regex(&what, &anchored)?;
        let hir = regex_syntax::Parser::new()
            .parse(&anchored)
            .map_err(|e| PatternError::Invalid(format!("{what}: {e}")))?;
        entries.push(super::stream::StreamEntry {
            name: r.name,
            regex,
            hir,
            json: r.json,
            columns: r.columns,
        });
    }
    super::stream::StreamPrefixes::new(entries, rank_tags.to_vec()).map_err(PatternError::Invalid)
}

/// Compiles one entry of `lines:`.
fn compile_line(
    l: LineRaw,
    line_fields: &HashMap<String, HashMap<String, FieldSpecRaw>>,
    ids: &HashMap<String, MetricId>,
    fields: &FieldMaps,
) -> Result<LineKind, PatternError> {
    let (regex, digits_alike) = compile_regex(&format!("line {}", l.name), &l.regex)?;
    if l.literal.is_empty() {
        return Err(PatternError::Invalid(format!(
            "line {}: the literal must not be empty",
            l.name
        )));
    }
    let mut overrides = HashMap::new();
    if let Some(o) = line_fields.get(&l.name) {
        for (key, spec) in o {
            if let Some(t) = resolve(key, spec.metric.as_ref(), spec, ids)? {
                overrides.insert(key.clone(), t);
            }
        }
    }
    let mut kind = LineKind {
        digits_alike,
        name: l.name,
        class: l.class,
        scope: l.scope,
        runner: l.runner,
        whole_pool: l.whole_pool,
        separators: l.separators.unwrap_or_else(|| vec![", ".into()]),
        kv: l.kv.unwrap_or_else(|| vec![": ".into()]),
        group_fields: Vec::new(),
        fields_group: None,
        stop: l.stop,
        requires: l.requires,
        overrides,
        regex,
    };
    if kind.separators.iter().any(|s| s.is_empty()) || kind.kv.iter().any(|s| s.is_empty()) {
        return Err(PatternError::Invalid(format!(
            "line {}: separators must not be empty",
            kind.name
        )));
    }
    for r in &kind.requires {
        if kind
            .target(r, &fields.prefill, &fields.decode, &fields.other)
            .is_none()
        {
            return Err(PatternError::Invalid(format!(
                "line {}: required field {r:?} is not a known field of this line",
                kind.name
            )));
        }
    }
    let names: Vec<(usize, String)> = kind
        .regex
        .capture_names()
        .enumerate()
        .filter_map(|(gi, n)| n.map(|n| (gi, n.to_string())))
        .collect();
    for (gi, n) in names {
        match n.as_str() {
            "fields" => kind.fields_group = Some(gi),
            _ if SPECIAL_GROUPS.contains(&n.as_str()) => {}
            _ => match kind.target(&n, &fields.prefill, &fields.decode, &fields.other) {
                Some(t) => kind.group_fields.push((gi, t)),
                None => {
                    return Err(PatternError::Invalid(format!(
                        "line {}: group {n:?} is not a known field",
                        kind.name
                    )))
                }
            },
        }
    }
    if kind.class == Class::Listen && group_named(&kind.regex, "port").is_none() {
        return Err(PatternError::Invalid(format!(
            "line {}: a listen line needs a `port` group",
            kind.name
        )));
    }
    Ok(kind)
}

/// Whether `re` has a group named `name`.
fn group_named(re: &Regex, name: &str) -> Option<usize> {
    re.capture_names().position(|n| n == Some(name))
}

/// Prometheus metric name rule: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
pub fn valid_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

impl Patterns {
    /// The shapes of these patterns' lines, for lines no kind read (built on first use, shared
    /// by every source: nothing per followed file).
    pub fn unread(&self) -> &Unread {
        self.unread.get_or_init(|| Patterns::build_unread(self))
    }

    /// The shapes of `pat`'s kinds (see [`Unread`]).
    fn build_unread(pat: &Patterns) -> Unread {
        let stats: Vec<usize> = (0..pat.lines.len())
            .filter(|&k| {
                matches!(
                    pat.lines[k].class,
                    Class::Prefill | Class::Decode | Class::Retract
                )
            })
            .collect();
        let mut kvs: Vec<String> = Vec::new();
        let mut starts: Vec<String> = vec!["] ".into()];
        for &k in &stats {
            let l = &pat.lines[k];
            for kv in &l.kv {
                if !kvs.contains(kv) {
                    kvs.push(kv.clone());
                }
            }
            for sep in l.separators.iter().chain(&l.kv) {
                if !starts.contains(sep) {
                    starts.push(sep.clone());
                }
            }
        }
        let mut keys: Vec<&str> = pat.keys().collect();
        keys.sort_unstable();
        keys.dedup();
        let mut stats_keys = Vec::new();
        for key in &keys {
            let mut own = None;
            for &k in &stats {
                if let Some(FieldTarget::Metric { id, .. }) = pat.field(&pat.lines[k], key) {
                    let m = &pat.metrics[usize::from(id)];
                    let moving = m.activity || m.kind == MetricKind::Counter;
                    own = Some(moving || own == Some(true));
                }
            }
            if let Some(own) = own {
                stats_keys.push((key.to_string(), own));
            }
        }
        let mut capacity_keys = Vec::new();
        for l in pat.lines.iter().filter(|l| {
            l.class == Class::Fact && l.scope == Scope::Server && l.kv.iter().any(|k| k == "=")
        }) {
            for key in &keys {
                if let Some(FieldTarget::Metric { id, .. }) = pat.field(l, key) {
                    let server = pat.metrics[usize::from(id)].scope == Scope::Server;
                    if server && !capacity_keys.iter().any(|c| c == key) {
                        capacity_keys.push(key.to_string());
                    }
                }
            }
        }
        Unread::new(stats_keys, kvs, starts, capacity_keys)
    }
}

mod families;

#[cfg(test)]
mod tests;
