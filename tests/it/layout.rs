//! The layout of `src/` kept as issue 33 left it: no import circle between the top-level modules
//! (nor between the submodules of one folder), no module importing a higher floor (sources never
//! import exporters nor the pipeline, the pipeline never imports exporters, the state never
//! imports sources), no non-test source file over 1,000 lines, and no folder directly under
//! `src/` holding more than a fifth of its non-test lines ([`MAX_FOLDER_PERCENT`]).
//!
//! Reads every `src/**/*.rs` as text: comments, strings and `#[cfg(test)]` items are left out, then
//! each `crate::…` path (and `super::…` in a submodule) is an edge from the module that writes it
//! to the module it names. A path counts only as far as it names a module file (`src/a/b.rs` or
//! `src/a/b/mod.rs`): `crate::state::State` is an edge to `state`, not to an item.
//!
//! An item a folder's `mod.rs` re-exports (`use super::Item` in a submodule) counts as the
//! folder's, not as the submodule's that defines it: a folder's face is its `mod.rs`.
//!
//! Known violations in files other work is changing are in the allow-lists below, to be removed;
//! an entry that no longer applies fails too, so the lists only shrink.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The most lines a source file may have, its `#[cfg(test)]` items not counted.
const MAX_LINES: usize = 1000;

/// The largest share (in per cent) of `src/`'s lines that one folder directly under `src/` may
/// hold, its subfolders included. Lines are counted as for [`MAX_LINES`]: `#[cfg(test)]` items
/// and test-only module files (`#[cfg(test)] mod tests;`) are not counted, in the folder nor in
/// the total; the files directly in `src/` count in the total only.
const MAX_FOLDER_PERCENT: usize = 20;

/// Import edges (`from -> to`, as the check names them) that close a circle today, in files
/// other helpers are restructuring: to be removed.
const ALLOWED_EDGES: &[&str] = &[];

/// Files over [`MAX_LINES`] today, in files other helpers are restructuring: to be removed.
const ALLOWED_LONG: &[&str] = &[];

/// Floors: `(lower, higher)`: code in `lower` must never import `higher`.
const FLOORS: &[(&str, &str)] = &[
    ("source", "export"),
    ("state", "source"),
    ("pipeline", "export"),
    ("source", "pipeline"),
];

/// One source file: its module path (`["state", "clock"]`; `[]` for the crate root) and text.
struct File {
    module: Vec<String>,
    rel: String,
    text: String,
}

/// `text` without comments, string and char literals (each replaced by a space, newlines kept
/// so line numbers still hold).
fn strip_literals(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let keep_newlines = |out: &mut String, s: &[u8]| {
        out.push(' ');
        out.extend(s.iter().filter(|&&c| c == b'\n').map(|_| '\n'));
    };
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            let end = b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |p| i + p);
            i = end;
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let (mut depth, mut j) = (1, i + 2);
            while j < b.len() && depth > 0 {
                if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                    depth += 1;
                    j += 2;
                } else if b[j] == b'*' && b.get(j + 1) == Some(&b'/') {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            keep_newlines(&mut out, &b[i..j]);
            i = j;
        } else if c == b'r'
            && matches!(b.get(i + 1), Some(b'"') | Some(b'#'))
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
        {
            // A raw string: r"…", r#"…"#.
            let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
            if b.get(i + 1 + hashes) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let start = i + 2 + hashes;
            let end = b[start..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |p| start + p + close.len());
            keep_newlines(&mut out, &b[i..end]);
            i = end;
        } else if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            keep_newlines(&mut out, &b[i..end]);
            i = end;
        } else if c == b'\'' {
            // A char literal ('a', '\n', '\u{1F600}', '"'), else a lifetime ('a).
            let end = if b.get(i + 1) == Some(&b'\\') {
                // Past the escaped character, to the closing quote.
                b.get(i + 3..)
                    .and_then(|r| r.iter().position(|&c| c == b'\''))
                    .map(|p| i + 4 + p)
            } else {
                let ch = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch) == Some(&b'\'')).then_some(i + 2 + ch)
            };
            match end {
                Some(end) => {
                    out.push(' ');
                    i = end;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The end (exclusive) of the item that starts at `from` in stripped text: its `;` or its
/// closing `}` at depth 0, after any further attributes.
fn item_end(s: &[u8], from: usize) -> usize {
    let mut depth = 0i32;
    let mut i = from;
    while i < s.len() {
        match s[i] {
            b'{' | b'(' | b'[' => depth += 1,
            b'}' | b')' | b']' => {
                depth -= 1;
                if depth == 0 && s[i] == b'}' {
                    return i + 1;
                }
            }
            b';' if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    s.len()
}

/// Stripped text without its `#[cfg(test)]` items, the lines those held, and the names of the
/// modules declared test-only (`#[cfg(test)] mod tests;`).
fn strip_tests(s: &str) -> (String, usize, Vec<String>) {
    const ATTR: &str = "#[cfg(test)]";
    let b = s.as_bytes();
    let (mut out, mut removed, mut test_mods) = (String::new(), 0, Vec::new());
    let mut i = 0;
    while let Some(p) = s[i..].find(ATTR) {
        let at = i + p;
        let end = item_end(b, at + ATTR.len());
        let item = &s[at + ATTR.len()..end];
        let words: Vec<&str> = item
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ';'))
            .filter(|w| !w.is_empty())
            .collect();
        if let Some(k) = words.iter().position(|w| *w == "mod") {
            if let Some(name) = words.get(k + 1).and_then(|n| n.strip_suffix(';')) {
                test_mods.push(name.to_string());
            }
        }
        out.push_str(&s[i..at]);
        // The attribute's line and every line the item runs on.
        removed += item.matches('\n').count() + 1;
        i = end;
    }
    out.push_str(&s[i..]);
    (out, removed, test_mods)
}

/// Every path a `crate::` or `super::` starts in `s`, as segments (a `use` group spread out:
/// `crate::{a::B, c}` gives `[crate, a, B]` and `[crate, c]`).
fn paths(s: &str) -> Vec<Vec<String>> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    for root in ["crate", "super"] {
        let mut from = 0;
        while let Some(p) = s[from..].find(root) {
            let at = from + p;
            from = at + root.len();
            let before = at.checked_sub(1).map(|j| b[j]);
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b':') {
                continue;
            }
            if !s[from..].starts_with("::") {
                continue;
            }
            let mut prefix = vec![root.to_string()];
            // `super::super::x`
            let mut j = from;
            while s[j..].starts_with("::super") {
                prefix.push("super".into());
                j += "::super".len();
            }
            tree(s, j, prefix, &mut out);
        }
    }
    out
}

/// Reads the use tree at `s[i..]` (just after a `::`-joined prefix) into `out`; returns where it
/// ends.
fn tree(s: &str, mut i: usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let b = s.as_bytes();
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    loop {
        skip_ws(&mut i);
        if !s[i..].starts_with("::") {
            out.push(prefix);
            return i;
        }
        i += 2;
        skip_ws(&mut i);
        if b.get(i) == Some(&b'{') {
            i += 1;
            loop {
                skip_ws(&mut i);
                if i >= b.len() || b[i] == b'}' {
                    out.push(prefix.clone());
                    return i + 1;
                }
                if b[i] == b',' {
                    i += 1;
                    continue;
                }
                // A member: `a::b`, `self`, `X as Y`, `*`, `{…}`.
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let mut p = prefix.clone();
                if i > start && &s[start..i] != "self" {
                    p.push(s[start..i].to_string());
                }
                i = tree(s, i, p, out);
                // Skip `as Name` and the like up to the next member.
                while i < b.len() && b[i] != b',' && b[i] != b'}' {
                    i += 1;
                }
            }
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        if i == start {
            out.push(prefix);
            return i;
        }
        prefix.push(s[start..i].to_string());
    }
}

/// The graph of one tree: for each folder (`""` for `src/` itself) its edges between direct
/// submodules, each with the files that write it; the lines over the limit; the floor breaches.
struct Layout {
    edges: BTreeMap<String, BTreeMap<(String, String), BTreeSet<String>>>,
    long: Vec<String>,
    floors: Vec<String>,
    /// Non-test lines of each folder directly under `src/`, and of all of `src/`.
    folders: BTreeMap<String, usize>,
    total: usize,
}

fn layout(files: &[File]) -> Layout {
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| f.module.clone()).collect();
    let mut edges: BTreeMap<String, BTreeMap<(String, String), BTreeSet<String>>> = BTreeMap::new();
    let mut test_only: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut kept = Vec::new();
    let mut long = Vec::new();
    for f in files {
        let (code, removed, test_mods) = strip_tests(&strip_literals(&f.text));
        for m in test_mods {
            let mut p = f.module.clone();
            p.push(m);
            test_only.insert(p);
        }
        let lines = f.text.lines().count() - removed.min(f.text.lines().count());
        if lines > MAX_LINES {
            long.push(format!("{} ({lines} lines)", f.rel));
        }
        kept.push((f, code, lines));
    }
    let mut floors = Vec::new();
    let (mut folders, mut total) = (BTreeMap::new(), 0);
    for (f, code, lines) in kept {
        if test_only.iter().any(|t| f.module.starts_with(t)) {
            continue;
        }
        total += lines;
        // `src/a/…`: in folder `a` (`src/a.rs` and `src/lib.rs` are in none).
        if f.rel.matches('/').count() > 1 {
            *folders.entry(f.module[0].clone()).or_default() += lines;
        }
        if f.module.is_empty() {
            continue;
        }
        for p in paths(&code) {
            // Resolve to a crate-absolute path.
            let mut abs: Vec<String> = if p[0] == "crate" {
                Vec::new()
            } else {
                // `super` from a file's module: its parent.
                let ups = p.iter().take_while(|s| *s == "super").count();
                if ups > f.module.len() {
                    continue;
                }
                f.module[..f.module.len() - ups].to_vec()
            };
            abs.extend(
                p.iter()
                    .skip_while(|s| *s == "crate" || *s == "super")
                    .cloned(),
            );
            // As far as it names a module.
            let mut target = Vec::new();
            for seg in &abs {
                target.push(seg.clone());
                if !modules.contains(&target) {
                    target.pop();
                    break;
                }
            }
            let k = f
                .module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            if k >= f.module.len() || k >= target.len() {
                continue; // into itself, a descendant or an ancestor: no edge between siblings
            }
            let folder = f.module[..k].join("/");
            let name = |m: &[String]| m[..=k].join("/");
            let (from, to) = (name(&f.module), name(&target));
            for (low, high) in FLOORS {
                if k == 0 && from == *low && to == *high {
                    floors.push(format!(
                        "{} imports {to} ({low} must never import {high})",
                        f.rel
                    ));
                }
            }
            edges
                .entry(folder)
                .or_default()
                .entry((from, to))
                .or_default()
                .insert(f.rel.clone());
        }
    }
    floors.sort();
    floors.dedup();
    long.sort();
    Layout {
        edges,
        long,
        floors,
        folders,
        total,
    }
}

/// The circles of one folder's graph, each named as a path that returns to its start
/// (`kv -> view -> kv`), with the files of each edge; edges in `allowed` left out.
fn circles(
    edges: &BTreeMap<(String, String), BTreeSet<String>>,
    allowed: &BTreeSet<String>,
) -> Vec<String> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        if !allowed.contains(&format!("{from} -> {to}")) {
            next.entry(from).or_default().push(to);
        }
    }
    // Tarjan's strongly connected components; each with more than one node holds a circle.
    struct T<'a> {
        next: &'a BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        sccs: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for &w in t.next.get(v).into_iter().flatten() {
            if !t.index.contains_key(w) {
                visit(t, w);
                let l = t.low[v].min(t.low[w]);
                t.low.insert(v, l);
            } else if t.on.contains(w) {
                let l = t.low[v].min(t.index[w]);
                t.low.insert(v, l);
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                scc.push(w);
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                t.sccs.push(scc);
            }
        }
    }
    let mut t = T {
        next: &next,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        sccs: Vec::new(),
    };
    for &v in next.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    let mut out = Vec::new();
    for scc in t.sccs {
        // A shortest way back from the component's first node to itself, inside the component.
        let inside: BTreeSet<&str> = scc.iter().copied().collect();
        let start = *inside.iter().next().unwrap();
        let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        let mut last = None;
        while let Some(v) = queue.pop_front() {
            for &w in next.get(v).into_iter().flatten() {
                if !inside.contains(w) {
                    continue;
                }
                if w == start {
                    last = Some(v);
                    queue.clear();
                    break;
                }
                if let std::collections::btree_map::Entry::Vacant(e) = prev.entry(w) {
                    e.insert(v);
                    queue.push_back(w);
                }
            }
        }
        let mut chain = Vec::new();
        let mut v = last.unwrap();
        while v != start {
            chain.push(v);
            v = prev[v];
        }
        chain.reverse();
        let way: Vec<&str> = std::iter::once(start)
            .chain(chain)
            .chain(std::iter::once(start))
            .collect();
        let hops: Vec<String> = way
            .windows(2)
            .map(|w| {
                let files = &edges[&(w[0].to_string(), w[1].to_string())];
                format!(
                    "{} -> {} ({})",
                    w[0],
                    w[1],
                    files.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        out.push(format!(
            "circle {} (of {{{}}}): {}",
            way.join(" -> "),
            inside.iter().copied().collect::<Vec<_>>().join(", "),
            hops.join("; ")
        ));
    }
    out
}

/// Every `.rs` file under `dir`, as a [`File`].
fn read_tree(dir: &Path) -> Vec<File> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<File>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(root, &p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.push(file(&rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out
}

/// A [`File`] at `rel` (relative to `src/`, `/`-separated).
fn file(rel: &str, text: String) -> File {
    let mut module: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if matches!(
        module.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        module.pop();
    }
    File {
        module,
        rel: format!("src/{rel}"),
        text,
    }
}

/// The folder directly under `src/` with the most lines, when it holds more than
/// [`MAX_FOLDER_PERCENT`] of them: named with its share.
fn oversized_folder(files: &[File]) -> Option<String> {
    let l = layout(files);
    let (name, &n) = l.folders.iter().max_by_key(|(_, &n)| n)?;
    (n * 100 > l.total * MAX_FOLDER_PERCENT).then(|| {
        format!(
            "src/{name}/ holds {:.1} % of the non-test lines of src/ ({n} of {}): over {MAX_FOLDER_PERCENT} %",
            n as f64 * 100.0 / l.total as f64,
            l.total
        )
    })
}

/// Everything wrong with `files`, one line each, against the allow-lists.
fn problems(files: &[File], allowed_edges: &[&str], allowed_long: &[&str]) -> Vec<String> {
    let l = layout(files);
    let allowed: BTreeSet<String> = allowed_edges.iter().map(|s| s.to_string()).collect();
    let mut out = Vec::new();
    let mut all_edges = BTreeSet::new();
    for edges in l.edges.values() {
        out.extend(circles(edges, &allowed));
        all_edges.extend(edges.keys().map(|(a, b)| format!("{a} -> {b}")));
    }
    for a in &allowed {
        if !all_edges.contains(a) {
            out.push(format!(
                "allow-listed edge {a} is gone: remove it from ALLOWED_EDGES"
            ));
        }
    }
    out.extend(l.floors);
    for long in &l.long {
        if !allowed_long
            .iter()
            .any(|a| long.starts_with(&format!("{a} (")))
        {
            out.push(format!("{long}: over {MAX_LINES} lines outside tests"));
        }
    }
    for a in allowed_long {
        if !l
            .long
            .iter()
            .any(|long| long.starts_with(&format!("{a} (")))
        {
            out.push(format!(
                "allow-listed file {a} is within {MAX_LINES} lines: remove it from ALLOWED_LONG"
            ));
        }
    }
    out
}

#[test]
fn src_has_no_circle_no_breached_floor_no_long_file() {
    let files = read_tree(&super::common::root().join("src"));
    assert!(files.len() > 50, "read {} files", files.len());
    // The reading itself works: edges every layout of this exporter has are found.
    let l = layout(&files);
    for (a, b) in [("view", "state"), ("export", "state"), ("export", "family")] {
        assert!(
            l.edges[""].contains_key(&(a.to_string(), b.to_string())),
            "{a} -> {b} not found"
        );
    }
    let mut found = problems(&files, ALLOWED_EDGES, ALLOWED_LONG);
    found.extend(oversized_folder(&files));
    assert!(found.is_empty(), "layout of src/:\n{}", found.join("\n"));
}

fn tree_of(files: &[(&str, &str)]) -> Vec<File> {
    files.iter().map(|(r, t)| file(r, t.to_string())).collect()
}

#[test]
fn a_circle_is_named_with_its_files() {
    let files = tree_of(&[
        ("lib.rs", "pub mod kv; pub mod view; pub mod family;"),
        ("kv.rs", "use crate::view::{share_capacity, share_usage};"),
        (
            "view.rs",
            "use crate::family::Family;\nfn f() { crate::kv::KvUse::of(&crate::kv::KvValues{}) }",
        ),
        ("family.rs", "pub struct Family;"),
    ]);
    assert_eq!(
        problems(&files, &[], &[]),
        vec!["circle kv -> view -> kv (of {kv, view}): kv -> view (src/kv.rs); view -> kv (src/view.rs)"]
    );
    // Allow-listed, the edge closes no circle; an allow-listed edge that is gone is named.
    assert_eq!(problems(&files, &["kv -> view"], &[]), Vec::<String>::new());
    assert_eq!(
        problems(&files, &["view -> family", "family -> kv"], &[]),
        vec![
            "circle kv -> view -> kv (of {kv, view}): kv -> view (src/kv.rs); view -> kv (src/view.rs)",
            "allow-listed edge family -> kv is gone: remove it from ALLOWED_EDGES",
        ]
    );
}

#[test]
fn comments_strings_and_test_items_are_no_imports() {
    let files = tree_of(&[
        ("lib.rs", ""),
        (
            "a.rs",
            "//! See [`crate::b`].\n/* crate::b::X */\nconst S: &str = \"crate::b::Y\";\n\
             const R: &str = r#\"crate::b \"quoted\" \"#;\nfn f<'a>(c: char) -> bool { c == '\"' }\n\
             #[cfg(test)]\nmod tests {\n    use crate::b::Z;\n}\n#[cfg(test)]\nmod more;\n",
        ),
        ("a/more.rs", "use crate::b::W;"),
        ("b.rs", "use crate::a::A;"),
    ]);
    assert_eq!(problems(&files, &[], &[]), Vec::<String>::new());
}

#[test]
fn submodules_of_one_folder_and_floors() {
    let files = tree_of(&[
        ("lib.rs", ""),
        (
            "source/mod.rs",
            "mod file; mod discover; pub fn now_unix() {}",
        ),
        (
            "source/discover.rs",
            "use super::{file::Follow, now_unix};\nuse crate::export::metrics::F;",
        ),
        ("source/file.rs", "use super::discover::Discovered;"),
        ("export/mod.rs", ""),
        ("export/metrics.rs", ""),
        (
            "state/mod.rs",
            "use crate::{record::R, source::file::Follow};",
        ),
        ("record.rs", ""),
    ]);
    assert_eq!(
        problems(&files, &[], &[]),
        vec![
            "circle source/discover -> source/file -> source/discover (of {source/discover, source/file}): \
             source/discover -> source/file (src/source/discover.rs); source/file -> source/discover (src/source/file.rs)",
            "src/source/discover.rs imports export (source must never import export)",
            "src/state/mod.rs imports source (state must never import source)",
        ]
    );
}

#[test]
fn a_long_file_counts_without_its_tests() {
    let body = "fn f() {}\n".repeat(MAX_LINES);
    let tests = "#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() {}\n}\n";
    let files = tree_of(&[
        ("lib.rs", ""),
        ("fits.rs", &format!("{body}{tests}")),
        ("over.rs", &format!("{body}fn g() {{}}\n{tests}")),
    ]);
    assert_eq!(
        problems(&files, &[], &[]),
        vec![format!(
            "src/over.rs ({} lines): over {MAX_LINES} lines outside tests",
            MAX_LINES + 1
        )]
    );
    assert_eq!(
        problems(&files, &[], &["src/over.rs", "src/fits.rs"]),
        vec![format!("allow-listed file src/fits.rs is within {MAX_LINES} lines: remove it from ALLOWED_LONG")]
    );
}

#[test]
fn a_folder_over_a_fifth_of_the_lines_is_named() {
    let body = |n: usize| "fn f() {}\n".repeat(n);
    let tests = "#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() {}\n}\n";
    let tree = |big: usize| {
        tree_of(&[
            ("lib.rs", &body(300)),
            ("big/mod.rs", &format!("{}{tests}", body(big - 10))),
            ("big/a.rs", &body(10)),
            ("small/mod.rs", &body(100)),
            ("one.rs", &body(400)),
        ])
    };
    // 200 of 1,000 lines (tests not counted): at the limit.
    assert_eq!(oversized_folder(&tree(200)), None);
    assert_eq!(
        oversized_folder(&tree(201)).as_deref(),
        Some("src/big/ holds 20.1 % of the non-test lines of src/ (201 of 1001): over 20 %")
    );
}
