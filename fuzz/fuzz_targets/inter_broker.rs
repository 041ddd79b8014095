//! Controller-to-broker codecs (LeaderAndIsr, StopReplica, UpdateMetadata,
//! ControlledShutdown): decoding never panics, and whatever decodes encodes
//! back to a body that decodes to the same message.
#![no_main]
use kshard::protocol::inter_broker::{decode_request, decode_response};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [selector, version, body @ ..] = data else {
        return;
    };
    let api_key = 4 + i16::from(selector & 3);
    // 0-9 covers every valid version of each API and a few invalid ones.
    let version = i16::from(version % 10);
    if selector & 4 == 0 {
        if let Ok(request) = decode_request(api_key, version, body) {
            // Encoding can fail: malformed UTF-8 is replaced on decode and
            // may grow a string past Kafka's length limit.
            if let Ok(bytes) = request.encode_to_vec(version) {
                assert_eq!(decode_request(api_key, version, &bytes), Ok(request));
            }
        }
    } else if let Ok(response) = decode_response(api_key, version, body) {
        if let Ok(bytes) = response.encode_to_vec(version) {
            assert_eq!(decode_response(api_key, version, &bytes), Ok(response));
        }
    }
});
