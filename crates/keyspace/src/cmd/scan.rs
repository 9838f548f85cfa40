//! HSCAN, SSCAN and ZSCAN over one collection: a compact one is returned whole with
//! cursor 0, as Redis answers for its small encodings; a large one a step at a time by
//! the collection's own cursor (`ferry_value`'s scans), which returns every element
//! present for the whole scan.

use bytes::Bytes;
use ferry_resp::glob;
use ferry_resp::Reply;

use crate::args::{int, is, syntax};

/// SCAN's COUNT when none is given (Redis's).
pub const DEFAULT_COUNT: usize = 10;

/// Most elements one step visits however large its COUNT, which bounds its reply.
pub const MAX_COUNT: usize = 100_000;

/// What a scan's words ask for.
pub struct ScanArgs<'w> {
    /// Where to go on from (0: the start).
    pub cursor: u64,
    /// MATCH's pattern.
    pattern: Option<&'w Bytes>,
    /// COUNT: elements to visit.
    pub count: usize,
    /// HSCAN's NOVALUES: fields only.
    novalues: bool,
}

/// Parses `KEY cursor [MATCH pattern] [COUNT n] [NOVALUES]` (the key and cursor at words
/// 1 and 2; NOVALUES only if `takes_novalues`).
pub fn scan_args(words: &[Bytes], takes_novalues: bool) -> Result<ScanArgs<'_>, Reply> {
    let cursor = std::str::from_utf8(&words[2])
        .ok()
        .and_then(|c| c.parse::<u64>().ok())
        .ok_or_else(|| Reply::err("invalid cursor"))?;
    let mut args = ScanArgs {
        cursor,
        pattern: None,
        count: DEFAULT_COUNT,
        novalues: false,
    };
    let mut i = 3;
    while i < words.len() {
        if is(&words[i], "MATCH") && i + 1 < words.len() {
            args.pattern = Some(&words[i + 1]);
            i += 2;
        } else if is(&words[i], "COUNT") && i + 1 < words.len() {
            let count = int(&words[i + 1])?;
            if count < 1 {
                return Err(syntax());
            }
            args.count = (count as usize).min(MAX_COUNT);
            i += 2;
        } else if takes_novalues && is(&words[i], "NOVALUES") {
            args.novalues = true;
            i += 1;
        } else {
            return Err(syntax());
        }
    }
    Ok(args)
}

/// The reply to one scan step: the next cursor and the elements visited that match (an
/// element, with its value or score for HSCAN and ZSCAN unless NOVALUES).
pub fn scan_reply<'a>(
    args: &ScanArgs<'_>,
    next: u64,
    items: impl IntoIterator<Item = (&'a [u8], Option<Bytes>)>,
) -> Reply {
    let mut out = Vec::new();
    for (element, value) in items {
        if args.pattern.is_some_and(|p| !glob::matches(p, element)) {
            continue;
        }
        out.push(Reply::Bulk(Bytes::copy_from_slice(element)));
        if let (Some(value), false) = (value, args.novalues) {
            out.push(Reply::Bulk(value));
        }
    }
    Reply::Array(vec![Reply::Bulk(Bytes::from(next.to_string())), Reply::Array(out)])
}
