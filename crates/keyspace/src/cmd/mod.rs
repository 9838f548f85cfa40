//! The data commands, one file per type; each is a function of its words (the name is
//! word 0, the arity already checked against the command table) over the [`Keys`] it
//! names. An `Err` is the error reply, and a command that errs writes nothing.

use ferry_resp::Reply;

use crate::keys::Keys;

pub mod bits;
pub mod expiry;
pub mod generic;
pub mod hash;
pub mod lcs;
pub mod list;
pub mod mpop;
pub mod scan;
pub mod set;
pub mod string;
pub mod zset;

/// What a command gives: its reply, or its error reply.
pub type Outcome = Result<Reply, Reply>;

/// Most items a random pick with repeats (a negative count) may return in one reply.
pub const MAX_RANDOM_PICKS: u64 = 1 << 24;

/// Indexes below `len` for HRANDFIELD, SRANDMEMBER and ZRANDMEMBER's `count`: distinct
/// ones (at most `len`) for a positive count, `-count` with repeats for a negative one.
pub fn random_picks(keys: &mut Keys, len: usize, count: i64) -> Result<Vec<usize>, Reply> {
    if count >= 0 {
        let want = (count as u64).min(len as u64) as usize;
        // A partial Fisher-Yates shuffle of the indexes.
        let mut indexes: Vec<usize> = (0..len).collect();
        for i in 0..want {
            let j = i + keys.random_below(len - i);
            indexes.swap(i, j);
        }
        indexes.truncate(want);
        return Ok(indexes);
    }
    let want = count.unsigned_abs();
    if want > MAX_RANDOM_PICKS {
        return Err(Reply::err("value is out of range"));
    }
    Ok((0..want).map(|_| keys.random_below(len)).collect())
}
