//! The line buffer over the input cut into reads of the sizes its first bytes give, against
//! the reference split (the same as tests/fuzz.rs's).
#![no_main]

use std::io::Read;

use libfuzzer_sys::fuzz_target;
use sglang_log_exporter::source::linebuf::{Event, LineBuf, READ_SIZE};

struct Chunked<'a> {
    data: &'a [u8],
    sizes: &'a [u8],
    i: usize,
}

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.i += 1;
        let want = usize::from(self.sizes[self.i % self.sizes.len()]).max(1) * 37;
        let n = want.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

#[derive(Debug, PartialEq)]
enum Ev {
    Line(Vec<u8>, u64),
    Nul,
    Over,
    Incomplete,
}

fn reference(data: &[u8], max: usize) -> Vec<Ev> {
    let mut out = Vec::new();
    let mut pos = 0u64;
    let mut rest = data;
    loop {
        let nl = rest.iter().position(|&c| c == b'\n');
        let seg = &rest[..nl.unwrap_or(rest.len())];
        let nuls = seg.iter().take_while(|&&b| b == 0).count();
        if nuls > 0 {
            out.push(Ev::Nul);
        }
        let body = &seg[nuls..];
        match nl {
            Some(n) => {
                pos += n as u64 + 1;
                out.push(if body.len() > max { Ev::Over } else { Ev::Line(body.to_vec(), pos) });
                rest = &rest[n + 1..];
            }
            None => {
                if body.len() > max {
                    out.push(Ev::Over);
                } else if !body.is_empty() {
                    out.push(Ev::Incomplete);
                }
                return out;
            }
        }
    }
}

fuzz_target!(|input: &[u8]| {
    let [m, k, rest @ ..] = input else { return };
    let max = usize::from(*m).max(1);
    let k = usize::from(*k % 8).min(rest.len());
    let (sizes, data) = rest.split_at(k);
    let sizes = if sizes.is_empty() { &[255u8][..] } else { sizes };
    let mut lb = LineBuf::new(max);
    let mut r = Chunked { data, sizes, i: 0 };
    let mut got = Vec::new();
    let mut push = |e: Event<'_>| {
        got.push(match e {
            Event::Line(l, p) => Ev::Line(l.to_vec(), p),
            Event::NulRun(_) => Ev::Nul,
            Event::Oversized => Ev::Over,
            Event::Incomplete => Ev::Incomplete,
        })
    };
    while lb.fill(&mut r, &mut push).unwrap() > 0 {
        assert!(lb.capacity() <= max + READ_SIZE);
    }
    lb.flush_partial(&mut push);
    assert_eq!(got, reference(data, max));
});
