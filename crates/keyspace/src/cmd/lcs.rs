//! LCS: the longest common subsequence of two strings, by the textbook dynamic program
//! Redis uses, with its replies (the subsequence, its length, or the matching ranges).

use bytes::Bytes;
use ferry_resp::Reply;

use crate::args::{int, is, syntax};
use crate::cmd::Outcome;
use crate::keys::Keys;

/// Most bytes LCS's table may take (Redis bounds it by `proto-max-bulk-len`, 512 MiB by
/// default): a command's transient memory has a limit like everything else.
pub const MAX_LCS_TABLE_BYTES: u64 = 512 * 1024 * 1024;

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN].
pub fn lcs(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let strings = (keys.string(&words[1]), keys.string(&words[2]));
    let (Ok(a), Ok(b)) = strings else {
        return Err(Reply::err("The specified keys must contain string values"));
    };
    let (a, b) = (a.unwrap_or_default(), b.unwrap_or_default());
    let (mut len_only, mut ranges, mut with_match_len, mut min_match_len) = (false, false, false, 0u64);
    let mut i = 3;
    while i < words.len() {
        let word = &words[i];
        if is(word, "IDX") {
            ranges = true;
        } else if is(word, "LEN") {
            len_only = true;
        } else if is(word, "WITHMATCHLEN") {
            with_match_len = true;
        } else if is(word, "MINMATCHLEN") && i + 1 < words.len() {
            min_match_len = int(&words[i + 1])?.max(0) as u64;
            i += 1;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    if len_only && ranges {
        return Err(Reply::err(
            "If you want both the length and indexes, please just use IDX.",
        ));
    }
    let cells = (a.len() as u64 + 1) * (b.len() as u64 + 1);
    if cells.saturating_mul(4) > MAX_LCS_TABLE_BYTES {
        return Err(Reply::err(
            "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let table = Table::new(&a, &b);
    let total = table.at(a.len(), b.len());
    if len_only {
        return Ok(Reply::Integer(i64::from(total)));
    }
    let (common, matches) = table.walk_back(&a, &b);
    if !ranges {
        return Ok(Reply::Bulk(Bytes::from(common)));
    }
    let matches = matches
        .into_iter()
        .filter(|found| min_match_len == 0 || found.len() >= min_match_len)
        .map(|found| {
            let range = |start: usize, end: usize| Reply::Array(vec![int_reply(start), int_reply(end)]);
            let mut item = vec![range(found.a.0, found.a.1), range(found.b.0, found.b.1)];
            if with_match_len {
                item.push(Reply::Integer(found.len() as i64));
            }
            Reply::Array(item)
        })
        .collect();
    Ok(Reply::Map(vec![
        (Reply::text("matches"), Reply::Array(matches)),
        (Reply::text("len"), Reply::Integer(i64::from(total))),
    ]))
}

fn int_reply(n: usize) -> Reply {
    Reply::Integer(n as i64)
}

/// One run of matching bytes: its first and last index in each string.
struct Match {
    a: (usize, usize),
    b: (usize, usize),
}

impl Match {
    fn len(&self) -> u64 {
        (self.a.1 - self.a.0 + 1) as u64
    }
}

/// LCS(i, j): the length of the longest common subsequence of `a[..i]` and `b[..j]`.
struct Table {
    cells: Vec<u32>,
    width: usize,
}

impl Table {
    fn new(a: &[u8], b: &[u8]) -> Table {
        let width = b.len() + 1;
        let mut cells = vec![0u32; (a.len() + 1) * width];
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                cells[i * width + j] = if a[i - 1] == b[j - 1] {
                    cells[(i - 1) * width + j - 1] + 1
                } else {
                    cells[(i - 1) * width + j].max(cells[i * width + j - 1])
                };
            }
        }
        Table { cells, width }
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.width + j]
    }

    /// The subsequence, and its runs from the strings' ends backwards (Redis's order).
    fn walk_back(&self, a: &[u8], b: &[u8]) -> (Vec<u8>, Vec<Match>) {
        let mut common = Vec::with_capacity(self.at(a.len(), b.len()) as usize);
        let mut matches = Vec::new();
        let mut run: Option<Match> = None;
        let (mut i, mut j) = (a.len(), b.len());
        while i > 0 && j > 0 {
            let mut run_ends = false;
            if a[i - 1] == b[j - 1] {
                common.push(a[i - 1]);
                match &mut run {
                    // Going backwards, a match right before the run extends it.
                    Some(current) if current.a.0 == i && current.b.0 == j => {
                        current.a.0 -= 1;
                        current.b.0 -= 1;
                    }
                    Some(_) => run_ends = true,
                    None => {
                        run = Some(Match {
                            a: (i - 1, i - 1),
                            b: (j - 1, j - 1),
                        })
                    }
                }
                if run.as_ref().is_some_and(|current| current.a.0 == 0 || current.b.0 == 0) {
                    run_ends = true;
                }
                i -= 1;
                j -= 1;
            } else {
                if self.at(i - 1, j) > self.at(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                run_ends = run.is_some();
            }
            if run_ends {
                matches.extend(run.take());
            }
        }
        common.reverse();
        (common, matches)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_s_documented_example() {
        let (a, b) = (b"ohmytext", b"mynewtext");
        let table = Table::new(a, b);
        assert_eq!(table.at(a.len(), b.len()), 6);
        let (common, matches) = table.walk_back(a, b);
        assert_eq!(common, b"mytext");
        let runs: Vec<((usize, usize), (usize, usize))> = matches.iter().map(|m| (m.a, m.b)).collect();
        assert_eq!(runs, vec![((4, 7), (5, 8)), ((2, 3), (0, 1))]);
    }
}
