//! Transaction records read back from disk: the `__transaction_state` key
//! and value, an end-transaction marker batch, and a `.txnindex` entry.
//! Decoding never panics, and whatever decodes encodes back to the same.
#![no_main]
use kshard::coordinator::transaction::txn_log_codec::{
    decode_key, decode_value, encode_key, encode_value,
};
use kshard_shards::log::control_batch::{build_end_txn_marker_batch, parse_end_txn_marker};
use kshard_shards::log::transaction_index::AbortedTxn;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [selector, body @ ..] = data else {
        return;
    };
    match selector % 4 {
        0 => {
            if let Ok(id) = decode_key(body) {
                assert_eq!(decode_key(&encode_key(&id)), Ok(id));
            }
        }
        1 => {
            if let Ok(Some(value)) = decode_value(Some(body)) {
                let again = decode_value(Some(&encode_value(&value)));
                assert_eq!(again, Ok(Some(value)));
            }
        }
        2 => {
            if let Ok(marker) = parse_end_txn_marker(body) {
                let rebuilt = build_end_txn_marker_batch(7, 3, marker, 1);
                assert_eq!(parse_end_txn_marker(&rebuilt).ok(), Some(marker));
            }
        }
        _ => {
            if let Ok(entry) = <&[u8; 34]>::try_from(body) {
                if let Ok(txn) = AbortedTxn::decode(entry) {
                    assert_eq!(AbortedTxn::decode(&txn.encode()), Ok(txn));
                }
            }
        }
    }
});
