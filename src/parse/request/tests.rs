//! Tests of the request-record reader: the lexer on the traps of
//! `docs/request-log-formats.md` §4 (quotes, nested braces and fake `meta_info` in user text,
//! ` ... ` truncation, non-literals), every record shape, and the line kinds that lead to it.

use std::sync::Arc;

use super::*;
use crate::parse::patterns::{Class, Patterns};
use crate::parse::Parser;

fn rec(text: &str) -> RequestRecord {
    let mut r = RequestRecord::default();
    read(text, &mut r).unwrap_or_else(|_| panic!("unreadable: {text}"));
    r
}

fn meta(text: &str) -> MetaInfo {
    rec(text).meta.expect("meta_info")
}

const META: &str = "'meta_info': {'id': 'r1', 'finish_reason': {'type': 'stop', 'matched': 2}, 'prompt_tokens': 8, 'completion_tokens': 3, 'cached_tokens': 0, 'e2e_latency': 0.25}";

#[test]
fn a_plain_finish_record() {
    let r = rec(&format!(
        "GenerateReqInput(text='hi', sampling_params={{'max_new_tokens': 8}}, rid='r1', stream=True, log_metrics=True), out={{'text': 'yo', {META}}}"
    ));
    assert!(r.finished && r.counts());
    assert_eq!(
        (r.stream, r.log_metrics, r.structured_output),
        (Some(true), Some(true), false)
    );
    let m = r.meta.unwrap();
    assert_eq!(m.prompt_tokens, Some(8.0));
    assert_eq!(m.completion_tokens, Some(3.0));
    assert_eq!(m.e2e_latency, Some(0.25));
    assert_eq!(m.finish, FinishKind::Stop);
}

#[test]
fn quotes_and_escapes() {
    // repr picks `"` when the text has `'` only; `\'` when it has both; `\\` for a backslash,
    // also right before the closing quote.
    for text in [
        r#""it's {'meta_info': {'prompt_tokens': 1}}""#,
        r#"'both \' and " here, out={\'x\': 1}'"#,
        r#"'C:\\Users\\'"#,
        r#"'\\'"#,
        r#"'tab\there \x1b[0m é'"#,
    ] {
        let m = meta(&format!(
            "GenerateReqInput(text={text}, stream=False), out={{'text': {text}, {META}}}"
        ));
        assert_eq!(
            (m.prompt_tokens, m.e2e_latency),
            (Some(8.0), Some(0.25)),
            "{text}"
        );
    }
}

#[test]
fn fake_meta_info_in_user_text_is_skipped() {
    // The generated text quotes a meta_info and an `out=` before the real one; with only `'` in
    // it, repr writes it between `"` and nothing inside is escaped.
    let text = r#""Tool said: {'e2e_latency': 0.01, 'completion_tokens': 99999, 'prompt_tokens': 1}, out={'meta_info': {'prompt_tokens': 5}} Finish: obj=GenerateReqInput(rid='fake')""#;
    let m = meta(&format!(
        "GenerateReqInput(text={text}), out={{'text': {text}, {META}}}"
    ));
    assert_eq!(m.prompt_tokens, Some(8.0));
    assert_eq!(m.completion_tokens, Some(3.0));
    assert_eq!(m.e2e_latency, Some(0.25));
}

#[test]
fn truncated_strings_and_lists() {
    // `repr(s[:1024]) + ' ... ' + repr(s[-1024:])`, also for lists, with brackets and quotes
    // inside the halves.
    let r = rec(&format!(
        "GenerateReqInput(text='head {{[(' ... 'tail ))', input_ids=[1, 2, 3] ... [7, 8, 9], stream=True), out={{'text': \"a'b\" ... 'c}}d', 'output_ids': [4, 5] ... [6], {META}}}"
    ));
    assert_eq!(r.stream, Some(true));
    assert_eq!(r.meta.unwrap().prompt_tokens, Some(8.0));
}

#[test]
fn non_literals_and_headers() {
    // An abort's status code under Python 3.10, an enum repr, and headers between obj and out.
    let r = rec("GenerateReqInput(text='x', stream=False, kind=<Kind.X: 1>), headers={'x-smg-routing-key': 'tenant-a'}, out={'text': '', 'meta_info': {'finish_reason': {'type': 'abort', 'message': 'too long', 'status_code': HTTPStatus.BAD_REQUEST}, 'prompt_tokens': 131200, 'completion_tokens': 0, 'e2e_latency': 0.01}}");
    let m = r.meta.unwrap();
    assert_eq!(m.finish, FinishKind::Abort);
    assert_eq!(m.prompt_tokens, Some(131200.0));
    assert_eq!(r.stream, Some(false));
}

#[test]
fn health_checks_receives_and_queue_aborts_do_not_count() {
    let health = rec(&format!(
        "GenerateReqInput(text=None, input_ids=[0], rid='HEALTH_CHECK_1', stream=False, log_metrics=False), out={{{META}}}"
    ));
    assert!(health.finished && !health.counts());
    let receive = rec("GenerateReqInput(text='hi', rid='r', stream=True)");
    assert!(!receive.finished && !receive.counts() && receive.meta.is_none());
    let queued = rec("GenerateReqInput(text='hi'), out={'text': '', 'meta_info': {'id': 'r', 'finish_reason': {'type': 'abort', 'status_code': 503}, 'e2e_latency': 30.0, 'completion_tokens': 0}}");
    assert!(queued.finished && !queued.counts());
}

#[test]
fn structured_output_keys() {
    let so = |sp: &str| {
        rec(&format!(
            "GenerateReqInput(sampling_params={sp}), out={{{META}}}"
        ))
        .structured_output
    };
    assert!(so("{'json_schema': '{\"type\": \"object\"}'}"));
    assert!(so("{'max_new_tokens': 1, 'ebnf': 'root ::= x'}"));
    assert!(so("{'structural_tag': {'begin': '<f>'}}"));
    assert!(!so(
        "{'regex': None, 'ebnf': '', 'json_schema': None, 'structural_tag': {}}"
    ));
    assert!(!so("{'max_new_tokens': 16, 'regex_hint': 'x'}"));
}

#[test]
fn meta_info_numbers_and_details() {
    let m = meta("X(), out={'meta_info': {'prompt_tokens': 412, 'cached_tokens': 384, 'cached_tokens_details': {'device': 300, 'host': 84, 'storage': 0, 'storage_backend': 'file'}, 'queue_time': 1e-05, 'forward_entry_time': 1793887201.9087422, 'num_retractions': 0, 'reasoning_tokens': 0, 'spec_verify_ct': 12, 'decode_throughput': inf, 'first_token_latency': None}}");
    assert_eq!(m.cached_details, Some([300.0, 84.0, 0.0]));
    assert_eq!(m.queue_time, Some(1e-05));
    assert_eq!(m.spec_verify_ct, Some(12.0));
    assert!(m.num_retractions_key && m.reasoning_tokens_key);
    // Not finite, or None: absent.
    assert_eq!((m.decode_throughput, m.first_token_latency), (None, None));
    let m = meta("X(), out={'meta_info': {'cached_tokens_details': None, 'finish_reason': 'FINISH_LENGTH: 128'}}");
    assert_eq!((m.cached_details, m.finish), (None, FinishKind::Length));
}

#[test]
fn legacy_in_records() {
    // v0.2.14-v0.4.0.post2: the dataclass after `in=`.
    let r = rec(&format!(
        "GenerateReqInput(text='a', stream=True), out={{'text': 'b', 'index': 0, {META}}}"
    ));
    assert_eq!((r.stream, r.counts()), (Some(true), true));
    // v0.2.11-v0.2.13: a dict; `stream` unknown.
    let r = rec(&format!(
        "{{'text': 'a, out={{'}}, out={{'text': 'b', {META}}}"
    ));
    assert_eq!((r.stream, r.counts()), (None, true));
    // v0.1.15-v0.2.10: the raw prompt, even with a fake `out=` dict inside it.
    let r = rec(&format!(
        "Tell me, out={{'text': 'x', 'meta_info': {{'prompt_tokens': 1}}}} (that was a quote), out={{'text': 'b', {META}}}"
    ));
    assert_eq!((r.stream, r.meta.unwrap().prompt_tokens), (None, Some(8.0)));
}

#[test]
fn json_records() {
    let line = r#"{"timestamp": "2026-04-20T09:30:00.595406", "event": "request.finished", "rid": "r", "obj": {"text": "say \"hi\" \\ {\"meta_info\": 1}", "sampling_params": {"regex": "[a-z]+"}, "stream": true, "log_metrics": true}, "headers": {"x-smg-routing-key": "t"}, "out": {"text": "ab...yz", "output_ids": [1, "...", 2], "meta_info": {"id": "r", "finish_reason": {"type": "length", "length": 1}, "prompt_tokens": 14, "completion_tokens": 1, "cached_tokens_details": null, "dp_rank": null, "e2e_latency": 0.07, "first_token_latency": NaN}}}"#;
    let r = rec(line);
    assert!(r.finished && r.counts() && r.structured_output);
    assert_eq!(r.stream, Some(true));
    let m = r.meta.unwrap();
    assert_eq!(
        (m.prompt_tokens, m.finish, m.first_token_latency),
        (Some(14.0), FinishKind::Length, None)
    );
    let t = r.timestamp.unwrap();
    assert_eq!(t.date.unwrap().to_string(), "2026-04-20");
    assert_eq!(t.time.to_string(), "09:30:00.595406");
    let received = rec(
        r#"{"timestamp": "2026-04-20T09:30:00.4124", "event": "request.received", "rid": "r", "obj": {"stream": false}}"#,
    );
    assert!(!received.finished && !received.counts());
}

#[test]
fn broken_records_are_unreadable() {
    for text in [
        "GenerateReqInput(text='never closed",
        "GenerateReqInput(text='x'), out={'meta_info': {'prompt_tokens': 1}",
        "GenerateReqInput(text='x'), out={'meta_info': {'prompt_tokens': 1}} trailing",
        "GenerateReqInput(text 'x')",
        r#"{"timestamp": "t", "event": "request.finished", "out": {"meta_info": {"prompt_tokens" 1}}}"#,
        "'a\\",
    ] {
        let mut r = RequestRecord::default();
        assert_eq!(read(text, &mut r), Err(Unreadable), "{text}");
        assert!(!r.counts(), "{text}");
    }
}

fn parser() -> Parser {
    Parser::new(Arc::new(Patterns::embedded().unwrap()))
}

#[test]
fn line_kinds_lead_to_the_reader() {
    let mut p = parser();
    let finish = format!("[2026-11-05 14:00:00] Finish: obj=GenerateReqInput(text='Decode batch, #running-req: 5, #token: 10', stream=False), out={{'text': ' HTTP/1.1\" 200', {META}}}");
    let r = p.parse(&finish).expect("a request line");
    assert_eq!((r.class, r.bad_values), (Class::Request, 0));
    assert!(r.request.unwrap().counts());
    assert_eq!(r.time.unwrap().time.to_string(), "14:00:00");
    // A Receive line quoting a stats line is a request record too, never a stats line.
    let receive = "[2026-11-05 14:00:00] Receive: obj=GenerateReqInput(text='Decode batch, #running-req: 5, #token: 10, token usage: 0.01, #queue-req: 0')";
    let r = p.parse(receive).unwrap();
    assert_eq!(r.class, Class::Request);
    assert!(!r.request.unwrap().counts());
    // Bare JSON takes its time from the record; legacy `in=` lines.
    let json = r#"{"timestamp": "2026-04-20T09:30:00.5", "event": "request.finished", "obj": {"stream": false}, "out": {"meta_info": {"prompt_tokens": 3}}}"#;
    let r = p.parse(json).unwrap();
    assert!(r.request.unwrap().counts());
    assert_eq!(r.time.unwrap().time.to_string(), "09:30:00.5");
    let legacy = format!("[12:00:00] in=GenerateReqInput(text='a', stream=False), out={{{META}}}");
    assert!(p.parse(&legacy).unwrap().request.unwrap().counts());
    // The literal inside another line's quoted text: not a request record.
    let quoted = format!("[2026-11-05 14:00:00] WARNING: got 'Finish: obj=GenerateReqInput(stream=True), out={{{META}}}'");
    assert!(p.parse(&quoted).is_none());
    // A record that cannot be read is of the kind, with a bad value and no request.
    let r = p
        .parse("[2026-11-05 14:00:00] Finish: obj=GenerateReqInput(text='cut")
        .unwrap();
    assert_eq!(
        (r.class, r.bad_values, r.request.is_none()),
        (Class::Request, 1, true)
    );
}

#[test]
fn a_record_of_megabytes_is_read_whole() {
    // Level 3: untruncated prompt and output ids, with quotes and brackets throughout.
    let prompt = "It's {a} [b] (c), \\\"q\\\" ".repeat(120_000);
    let ids = (0..400_000)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let line = format!(
        "[2026-11-05 14:00:00] Finish: obj=GenerateReqInput(text='{}', stream=True), out={{'text': '{}', 'output_ids': [{ids}], {META}}}",
        prompt.replace('\'', "\\'"),
        prompt.replace('\'', "\\'"),
    );
    assert!(line.len() > 8 << 20);
    let mut p = parser();
    let r = p.parse(&line).unwrap();
    assert_eq!(r.request.unwrap().meta.unwrap().prompt_tokens, Some(8.0));
}
