//! Replays every file of tests/malformed (the bytes one client connection
//! writes: size-prefixed request frames) against an in-process broker with
//! real logs: each complete frame through `InProcessBroker::call` (the
//! connection's dispatch), then the whole file through a loopback connection
//! (`connection::serve`). The broker must answer or close, never panic
//! (release builds abort), never hang, and still answer ApiVersions after.
//! Files come from scripts/malformed_corpus.py and from fuzzing
//! (fuzz/README: a crash's reproducer is turned into a file here).

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use kshard::server::in_process::{Answer, InProcessBroker};

/// Cases that still crash or hang the broker, with the issue item that
/// fixes them; `cargo test --release --test malformed_requests -- --ignored`
/// runs just these. Remove a line when its fix lands.
const KNOWN_FAILURES: &[(&str, &str)] = &[];

/// How long one request may take before the broker counts as hung.
const ANSWER_WAIT: Duration = Duration::from_secs(20);

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/malformed")
}

fn cases() -> Vec<(String, Vec<u8>)> {
    let mut cases: Vec<(String, Vec<u8>)> = std::fs::read_dir(corpus_dir())
        .expect("tests/malformed")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).expect("case file"))
        })
        .collect();
    cases.sort();
    cases
}

/// The complete frames of `bytes` (size prefixes removed), and whether
/// bytes were left over (a partial or oversized frame).
fn frames(bytes: &[u8]) -> (Vec<Bytes>, bool) {
    let mut out = Vec::new();
    let mut rest = bytes;
    while rest.len() >= 4 {
        let size = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
        if size < 0 || rest.len() - 4 < size as usize {
            break;
        }
        out.push(Bytes::copy_from_slice(&rest[4..4 + size as usize]));
        rest = &rest[4 + size as usize..];
    }
    (out, !rest.is_empty())
}

/// ApiVersions v0, correlation id 7.
fn api_versions_frame() -> Bytes {
    let mut f = vec![0, 18, 0, 0, 0, 0, 0, 7];
    f.extend_from_slice(&4i16.to_be_bytes());
    f.extend_from_slice(b"test");
    Bytes::from(f)
}

fn replay(name: &str, bytes: &[u8]) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("kshard-malformed-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let broker = InProcessBroker::start(&dir, &[])?;
    let (frames, _partial) = frames(bytes);
    for (i, frame) in frames.into_iter().enumerate() {
        if let Answer::Pending = broker.call(frame, ANSWER_WAIT) {
            return Err(format!(
                "{name}: request {i} unanswered after {ANSWER_WAIT:?}"
            ));
        }
    }
    let exchanged = broker.exchange(bytes, ANSWER_WAIT)?;
    if !exchanged.closed {
        return Err(format!(
            "{name}: the connection neither answered everything nor closed in {ANSWER_WAIT:?}"
        ));
    }
    match broker.call(api_versions_frame(), ANSWER_WAIT) {
        Answer::Response(r) if r.len() > 8 => {}
        other => return Err(format!("{name}: ApiVersions afterwards: {other:?}")),
    }
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn run(known_failures: bool) {
    let mut failures = Vec::new();
    let mut ran = 0;
    for (name, bytes) in cases() {
        let known = KNOWN_FAILURES.iter().find(|(n, _)| *n == name);
        if known.is_some() != known_failures {
            if let Some((_, why)) = known {
                eprintln!("skipped {name}: known failure, {why}");
            }
            continue;
        }
        ran += 1;
        if let Err(e) = replay(&name, &bytes) {
            failures.push(e);
        }
    }
    assert!(
        ran > 0 || known_failures,
        "no cases in {}",
        corpus_dir().display()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn malformed_requests_are_answered_or_closed() {
    run(false);
}

#[test]
#[ignore = "the cases of KNOWN_FAILURES: crash or hang until their fixes land"]
fn known_failures_still_fail() {
    run(true);
}

#[test]
fn every_known_failure_names_a_case() {
    let names: Vec<String> = cases().into_iter().map(|(n, _)| n).collect();
    for (name, _) in KNOWN_FAILURES {
        assert!(names.iter().any(|n| n == name), "no file for {name}");
    }
}
