//! HSCAN, SSCAN and ZSCAN over one collection: the whole collection in one reply with
//! cursor 0, as Redis answers for its small encodings; it returns every element present
//! for the whole scan, which is all SCAN's contract asks.

use bytes::Bytes;
use ferry_resp::Reply;

use crate::args::{int, is, syntax};
use crate::cmd::Outcome;
use ferry_resp::glob;

/// The reply to a scan of `items` (an element, with its value or score for HSCAN and
/// ZSCAN), after checking the cursor and options in `words` (`KEY cursor` at 1 and 2).
pub fn scan_reply(words: &[Bytes], items: Vec<(Bytes, Option<Bytes>)>, takes_novalues: bool) -> Outcome {
    let cursor = std::str::from_utf8(&words[2]).ok().and_then(|c| c.parse::<u64>().ok());
    if cursor.is_none() {
        return Err(Reply::err("invalid cursor"));
    }
    let mut pattern: Option<&Bytes> = None;
    let mut novalues = false;
    let mut i = 3;
    while i < words.len() {
        if is(&words[i], "MATCH") && i + 1 < words.len() {
            pattern = Some(&words[i + 1]);
            i += 2;
        } else if is(&words[i], "COUNT") && i + 1 < words.len() {
            if int(&words[i + 1])? < 1 {
                return Err(syntax());
            }
            i += 2;
        } else if takes_novalues && is(&words[i], "NOVALUES") {
            novalues = true;
            i += 1;
        } else {
            return Err(syntax());
        }
    }
    let mut out = Vec::new();
    for (element, value) in items {
        if pattern.is_some_and(|p| !glob::matches(p, &element)) {
            continue;
        }
        out.push(Reply::Bulk(element));
        if let (Some(value), false) = (value, novalues) {
            out.push(Reply::Bulk(value));
        }
    }
    Ok(Reply::Array(vec![
        Reply::Bulk(Bytes::from_static(b"0")),
        Reply::Array(out),
    ]))
}
