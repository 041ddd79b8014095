//! Request framing and decoding: header, API table check, body codec
//! (the crate's, and `protocol::legacy` for the versions it no longer knows).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = kshard::protocol::decode_frame(bytes::Bytes::copy_from_slice(data));
});
