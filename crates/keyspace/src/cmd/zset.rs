//! The sorted-set commands.

use bytes::Bytes;
use ferry_resp::Reply;

use std::sync::Arc;

use ferry_value::{Entry, Value, ZSet};
use indexmap::IndexMap;

use crate::args::{bulk, float, format_f64, int, is, owned, parse_f64, syntax};
use crate::cmd::scan::{scan_args, scan_reply};
use crate::cmd::{random_picks, Outcome};
use crate::keys::{as_type, wrong_type, Keys};

fn nan() -> Reply {
    Reply::err("resulting score is not a number (NaN)")
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...].
pub fn zadd(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) = (false, false, false, false, false, false);
    let mut i = 2;
    while i < words.len() {
        let word = &words[i];
        match () {
            _ if is(word, "NX") => nx = true,
            _ if is(word, "XX") => xx = true,
            _ if is(word, "GT") => gt = true,
            _ if is(word, "LT") => lt = true,
            _ if is(word, "CH") => ch = true,
            _ if is(word, "INCR") => incr = true,
            _ => break,
        }
        i += 1;
    }
    let pairs = &words[i..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(syntax());
    }
    if nx && xx {
        return Err(Reply::err("XX and NX options at the same time are not compatible"));
    }
    if (nx && (gt || lt)) || (gt && lt) {
        return Err(Reply::err(
            "GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if incr && pairs.len() > 2 {
        return Err(Reply::err("INCR option supports a single increment-element pair"));
    }
    let mut scores = Vec::with_capacity(pairs.len() / 2);
    for pair in pairs.chunks(2) {
        scores.push((float(&pair[0])?, pair[1].clone()));
    }
    if keys.read(&words[1], as_type::zset)?.is_none() && xx {
        return Ok(if incr { Reply::Null } else { Reply::Integer(0) });
    }
    let (mut added, mut changed) = (0, 0);
    let mut incremented = None;
    for (score, member) in scores {
        let old = keys.view(&words[1], as_type::zset).and_then(|z| z.score(&member));
        if (nx && old.is_some()) || (xx && old.is_none()) {
            continue;
        }
        let new = match (incr, old) {
            (true, Some(old)) => old + score,
            _ => score,
        };
        if new.is_nan() {
            return Err(nan());
        }
        if let Some(old) = old {
            if (gt && new <= old) || (lt && new >= old) {
                continue;
            }
        }
        incremented = Some(new);
        match old {
            None => {
                keys.zadd(&words[1], &member, new)?;
                added += 1;
            }
            Some(old) if old != new => {
                keys.zadd(&words[1], &member, new)?;
                changed += 1;
            }
            Some(_) => {}
        }
    }
    Ok(if incr {
        incremented.map_or(Reply::Null, Reply::Double)
    } else {
        Reply::Integer(if ch { added + changed } else { added })
    })
}

/// ZINCRBY key increment member.
pub fn zincrby(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let delta = float(&words[2])?;
    let old = keys.read(&words[1], as_type::zset)?.and_then(|z| z.score(&words[3]));
    let new = old.unwrap_or(0.0) + delta;
    if new.is_nan() {
        return Err(nan());
    }
    keys.zadd(&words[1], &words[3], new)?;
    Ok(Reply::Double(new))
}

/// ZSCORE key member.
pub fn zscore(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    Ok(keys
        .read(&words[1], as_type::zset)?
        .and_then(|z| z.score(&words[2]))
        .map_or(Reply::Null, Reply::Double))
}

/// ZMSCORE key member [member ...].
pub fn zmscore(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let zset = keys.read(&words[1], as_type::zset)?;
    Ok(Reply::Array(
        words[2..]
            .iter()
            .map(|m| zset.and_then(|z| z.score(m)).map_or(Reply::Null, Reply::Double))
            .collect(),
    ))
}

/// ZCARD key.
pub fn zcard(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(
        keys.read(&words[1], as_type::zset)?.map_or(0, |z| z.len() as i64),
    ))
}

/// ZRANK and ZREVRANK key member [WITHSCORE].
pub fn zrank(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let with_score = match words.len() {
        3 => false,
        4 if is(&words[3], "WITHSCORE") => true,
        _ => return Err(syntax()),
    };
    let rev = is(&words[0], "zrevrank");
    // WITHSCORE asks for an array, so a missing member is the null array (Redis 7.2).
    let missing = if with_score { Reply::NullArray } else { Reply::Null };
    let Some(zset) = keys.read(&words[1], as_type::zset)? else {
        return Ok(missing);
    };
    let Some(rank) = zset.rank(&words[2]) else {
        return Ok(missing);
    };
    let rank = if rev { zset.len() - 1 - rank } else { rank } as i64;
    Ok(if with_score {
        let score = zset.score(&words[2]).unwrap_or_default();
        Reply::Array(vec![Reply::Integer(rank), Reply::Double(score)])
    } else {
        Reply::Integer(rank)
    })
}

/// A score bound: `1.5`, `(1.5` (exclusive), `-inf`, `+inf`.
fn score_bound(word: &[u8]) -> Result<(f64, bool), Reply> {
    let bad = || Reply::err("min or max is not a float");
    match word.strip_prefix(b"(") {
        Some(rest) => Ok((parse_f64(rest).ok_or_else(bad)?, true)),
        None => Ok((parse_f64(word).ok_or_else(bad)?, false)),
    }
}

/// A lex bound: `[a`, `(a`, `-`, `+`.
#[derive(Clone)]
enum Lex {
    Min,
    Max,
    Inclusive(Bytes),
    Exclusive(Bytes),
}

fn lex_bound(word: &Bytes) -> Result<Lex, Reply> {
    match word.first() {
        Some(b'-') if word.len() == 1 => Ok(Lex::Min),
        Some(b'+') if word.len() == 1 => Ok(Lex::Max),
        Some(b'[') => Ok(Lex::Inclusive(word.slice(1..))),
        Some(b'(') => Ok(Lex::Exclusive(word.slice(1..))),
        _ => Err(Reply::err("min or max not valid string range item")),
    }
}

/// What a range selects.
enum Range {
    Ranks(i64, i64),
    Scores((f64, bool), (f64, bool)),
    Lex(Lex, Lex),
}

/// How many members come before a lex bound's first one.
fn lex_rank(zset: &ZSet, bound: &Lex, upper: bool) -> usize {
    match bound {
        Lex::Min => 0,
        Lex::Max => zset.len(),
        // A lower bound's first member is the first at or past it (past it, exclusive);
        // an upper bound ends before the first past it (at or past it, exclusive).
        Lex::Inclusive(b) => zset.count_before(|_, m| if upper { m <= &b[..] } else { m < &b[..] }),
        Lex::Exclusive(b) => zset.count_before(|_, m| if upper { m < &b[..] } else { m <= &b[..] }),
    }
}

/// The ranks `from..to` (ascending) a range selects; rank ranges count from the highest
/// score when `rev`.
fn span(zset: &ZSet, range: &Range, rev: bool) -> (usize, usize) {
    let len = zset.len();
    let (from, to) = match range {
        Range::Ranks(start, stop) => match crate::args::index_range(*start, *stop, len) {
            Some((from, to)) if rev => (len - 1 - to, len - from),
            Some((from, to)) => (from, to + 1),
            None => (0, 0),
        },
        Range::Scores((min, min_ex), (max, max_ex)) => (
            zset.count_before(|s, _| if *min_ex { s <= *min } else { s < *min }),
            zset.count_before(|s, _| if *max_ex { s < *max } else { s <= *max }),
        ),
        Range::Lex(min, max) => (lex_rank(zset, min, false), lex_rank(zset, max, true)),
    };
    (from, to.max(from))
}

/// The (score, member) pairs a range selects, in reply order.
fn select(zset: &ZSet, range: &Range, rev: bool, limit: Option<(i64, i64)>) -> Vec<(f64, Bytes)> {
    let (from, to) = span(zset, range, rev);
    let (offset, count) = limit.unwrap_or((0, -1));
    if offset < 0 || from == to {
        return Vec::new();
    }
    let run = if rev {
        zset.iter_from(to - 1, true)
    } else {
        zset.iter_from(from, false)
    };
    let count = if count < 0 { usize::MAX } else { count as usize };
    run.take(to - from)
        .skip(offset as usize)
        .take(count)
        .map(|(score, member)| (score, owned(member)))
        .collect()
}

/// Members, or with scores members and their scores as pairs (flat in RESP2, an array of
/// pairs in RESP3, as Redis answers).
fn pairs_reply(pairs: Vec<(f64, Bytes)>, with_scores: bool) -> Reply {
    if with_scores {
        Reply::Pairs(
            pairs
                .into_iter()
                .map(|(score, member)| (Reply::Bulk(member), Reply::Double(score)))
                .collect(),
        )
    } else {
        Reply::Array(pairs.into_iter().map(|(_, member)| Reply::Bulk(member)).collect())
    }
}

/// What ZRANGE's words (after key, min and max at `from`) ask.
struct RangeQuery {
    range: Range,
    rev: bool,
    limit: Option<(i64, i64)>,
    with_scores: bool,
}

/// Parses ZRANGE's form from `words`: `key min max` at `at`, options after; `by` and
/// `rev` preset for the old commands (ZRANGEBYSCORE, ZREVRANGE, ...).
fn range_query(
    words: &[Bytes],
    at: usize,
    mut by: Option<&str>,
    mut rev: bool,
    store: bool,
) -> Result<RangeQuery, Reply> {
    let old_form = by.is_some() || rev;
    let (mut limit, mut with_scores) = (None, false);
    let mut i = at + 3;
    while i < words.len() {
        let word = &words[i];
        if !store && is(word, "WITHSCORES") {
            with_scores = true;
        } else if is(word, "LIMIT") && i + 2 < words.len() {
            limit = Some((int(&words[i + 1])?, int(&words[i + 2])?));
            i += 2;
        } else if !old_form && is(word, "BYSCORE") && by.is_none() {
            by = Some("score");
        } else if !old_form && is(word, "BYLEX") && by.is_none() {
            by = Some("lex");
        } else if !old_form && is(word, "REV") {
            rev = true;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    if limit.is_some() && by.is_none() {
        return Err(Reply::err(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if with_scores && by == Some("lex") {
        return Err(Reply::err(
            "syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    // In the reversed forms the first bound is the high one.
    let (first, second) = (&words[at + 1], &words[at + 2]);
    let (low, high) = if rev && by.is_some() {
        (second, first)
    } else {
        (first, second)
    };
    let range = match by {
        None => Range::Ranks(int(first)?, int(second)?),
        Some("score") => Range::Scores(score_bound(low)?, score_bound(high)?),
        _ => Range::Lex(lex_bound(low)?, lex_bound(high)?),
    };
    Ok(RangeQuery {
        range,
        rev,
        limit,
        with_scores,
    })
}

/// ZRANGE and its older forms: ZREVRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX,
/// ZREVRANGEBYLEX.
pub fn zrange(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let name = String::from_utf8_lossy(&words[0]).to_ascii_lowercase();
    let (by, rev) = match name.as_str() {
        "zrevrange" => (None, true),
        "zrangebyscore" => (Some("score"), false),
        "zrevrangebyscore" => (Some("score"), true),
        "zrangebylex" => (Some("lex"), false),
        "zrevrangebylex" => (Some("lex"), true),
        _ => (None, false),
    };
    let query = range_query(words, 1, by, rev, false)?;
    let Some(zset) = keys.read(&words[1], as_type::zset)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    Ok(pairs_reply(
        select(zset, &query.range, query.rev, query.limit),
        query.with_scores,
    ))
}

/// ZRANGESTORE destination source min max [BYSCORE|BYLEX] [REV] [LIMIT offset count].
pub fn zrangestore(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let query = range_query(words, 2, None, false, true)?;
    let selected = match keys.read(&words[2], as_type::zset)? {
        Some(zset) => select(zset, &query.range, query.rev, query.limit),
        None => Vec::new(),
    };
    let len = selected.len();
    store_zset(keys, &words[1], selected.iter().map(|(s, m)| (*s, &m[..])))?;
    Ok(Reply::Integer(len as i64))
}

/// Stores a sorted set of `pairs` (distinct members) at `key`, or deletes `key` when
/// there are none.
fn store_zset<'a>(
    keys: &mut Keys,
    key: &[u8],
    pairs: impl Iterator<Item = (f64, &'a [u8])> + Clone,
) -> Result<(), Reply> {
    let zset = ZSet::from_pairs(pairs, keys.encodings());
    let entry = (!zset.is_empty()).then(|| Entry::new(Value::ZSet(Arc::new(zset))));
    keys.put(key, entry)
}

/// ZCOUNT key min max, ZLEXCOUNT key min max.
pub fn zcount(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let range = if is(&words[0], "zlexcount") {
        Range::Lex(lex_bound(&words[2])?, lex_bound(&words[3])?)
    } else {
        Range::Scores(score_bound(&words[2])?, score_bound(&words[3])?)
    };
    let Some(zset) = keys.read(&words[1], as_type::zset)? else {
        return Ok(Reply::Integer(0));
    };
    let (from, to) = span(zset, &range, false);
    Ok(Reply::Integer((to - from) as i64))
}

/// ZREM key member [member ...].
pub fn zrem(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let mut removed = 0;
    for member in &words[2..] {
        removed += i64::from(keys.zrem(&words[1], member)?.is_some());
    }
    Ok(Reply::Integer(removed))
}

/// ZREMRANGEBYRANK, ZREMRANGEBYSCORE, ZREMRANGEBYLEX key min max.
pub fn zremrange(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let name = String::from_utf8_lossy(&words[0]).to_ascii_lowercase();
    let range = match name.as_str() {
        "zremrangebyrank" => Range::Ranks(int(&words[2])?, int(&words[3])?),
        "zremrangebyscore" => Range::Scores(score_bound(&words[2])?, score_bound(&words[3])?),
        _ => Range::Lex(lex_bound(&words[2])?, lex_bound(&words[3])?),
    };
    let Some(zset) = keys.read(&words[1], as_type::zset)? else {
        return Ok(Reply::Integer(0));
    };
    let (from, to) = span(zset, &range, false);
    let doomed: Vec<Bytes> = zset
        .iter_from(from, false)
        .take(to - from)
        .map(|(_, m)| owned(m))
        .collect();
    for member in &doomed {
        keys.zrem(&words[1], member)?;
    }
    Ok(Reply::Integer(doomed.len() as i64))
}

/// ZPOPMIN and ZPOPMAX key [count].
pub fn zpop(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    if words.len() > 3 {
        return Err(syntax());
    }
    let count = match words.get(2) {
        None => 1,
        Some(count) => match int(count)? {
            n if n < 0 => return Err(Reply::err("value is out of range, must be positive")),
            n => n as usize,
        },
    };
    let max = is(&words[0], "zpopmax");
    if keys.read(&words[1], as_type::zset)?.is_none() {
        return Ok(Reply::Array(Vec::new()));
    }
    let popped = pop_ends(keys, &words[1], max, count)?;
    // With a count, pairs (nested in RESP3); without, one flat member and score.
    if words.len() == 3 {
        return Ok(pairs_reply(popped, true));
    }
    Ok(Reply::Array(
        popped
            .into_iter()
            .flat_map(|(score, member)| [Reply::Bulk(member), Reply::Double(score)])
            .collect(),
    ))
}

/// ZRANDMEMBER key [count [WITHSCORES]].
pub fn zrandmember(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    if words.len() > 4 || (words.len() == 4 && !is(&words[3], "WITHSCORES")) {
        return Err(syntax());
    }
    let count = words.get(2).map(|c| int(c)).transpose()?;
    let Some(len) = keys.read(&words[1], as_type::zset)?.map(ZSet::len) else {
        return Ok(if count.is_some() {
            Reply::Array(Vec::new())
        } else {
            Reply::Null
        });
    };
    let picks = random_picks(keys, len, count.unwrap_or(1))?;
    let zset = keys.view(&words[1], as_type::zset).ok_or_else(wrong_type)?;
    let Some(_) = count else {
        return Ok(picks
            .first()
            .and_then(|&at| zset.at(at))
            .map_or(Reply::Null, |(_, m)| bulk(m)));
    };
    let pairs = picks
        .iter()
        .filter_map(|&at| zset.at(at).map(|(s, m)| (s, owned(m))))
        .collect();
    Ok(pairs_reply(pairs, words.len() == 4))
}

/// How ZUNION and ZINTER combine a member's scores.
#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            // inf + -inf is NaN; Redis makes it 0.
            Aggregate::Sum => {
                let sum = a + b;
                if sum.is_nan() {
                    0.0
                } else {
                    sum
                }
            }
            Aggregate::Min => a.min(b),
            Aggregate::Max => a.max(b),
        }
    }
}

/// A source of ZUNION/ZINTER/ZDIFF as (member, score): a sorted set, or a set (score 1).
fn source(keys: &mut Keys, key: &[u8]) -> Result<Option<Vec<(Bytes, f64)>>, Reply> {
    Ok(match keys.entry(key)? {
        None => None,
        Some(entry) => match &entry.value {
            Value::ZSet(zset) => Some(zset.iter().map(|(s, m)| (owned(m), s)).collect()),
            Value::Set(set) => Some(set.iter().map(|m| (owned(&m), 1.0)).collect()),
            _ => return Err(wrong_type()),
        },
    })
}

/// Pops up to `count` members from the highest (`max`) or lowest end of `key`'s sorted
/// set, in pop order.
pub(crate) fn pop_ends(keys: &mut Keys, key: &[u8], max: bool, count: usize) -> Result<Vec<(f64, Bytes)>, Reply> {
    let popped: Vec<(f64, Bytes)> = match keys.view(key, as_type::zset) {
        None => Vec::new(),
        Some(zset) if max => zset
            .iter_from(zset.len().saturating_sub(1), true)
            .take(count)
            .map(|(s, m)| (s, owned(m)))
            .collect(),
        Some(zset) => zset.iter().take(count).map(|(s, m)| (s, owned(m))).collect(),
    };
    for (_, member) in &popped {
        keys.zrem(key, member)?;
    }
    Ok(popped)
}

/// ZUNION, ZINTER, ZDIFF numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]
/// [WITHSCORES], and their STORE forms with a destination first.
pub fn zalgebra(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let name = String::from_utf8_lossy(&words[0]).to_ascii_lowercase();
    let store = name.ends_with("store");
    let at = if store { 2 } else { 1 };
    let numkeys = int(&words[at])?;
    if numkeys <= 0 {
        return Err(Reply::err(format!(
            "at least 1 input key is needed for '{name}' command"
        )));
    }
    let numkeys = numkeys as usize;
    if numkeys > words.len() - at - 1 {
        return Err(syntax());
    }
    let sources = &words[at + 1..at + 1 + numkeys];
    let diff = name.starts_with("zdiff");
    let inter = name.starts_with("zinter");
    let mut weights = vec![1.0; numkeys];
    let mut aggregate = Aggregate::Sum;
    let mut with_scores = false;
    let mut i = at + 1 + numkeys;
    while i < words.len() {
        if !diff && is(&words[i], "WEIGHTS") && i + numkeys < words.len() {
            for (n, weight) in weights.iter_mut().enumerate() {
                *weight = parse_f64(&words[i + 1 + n]).ok_or_else(|| Reply::err("weight value is not a float"))?;
            }
            i += numkeys;
        } else if !diff && is(&words[i], "AGGREGATE") && i + 1 < words.len() {
            let kind = &words[i + 1];
            aggregate = if is(kind, "SUM") {
                Aggregate::Sum
            } else if is(kind, "MIN") {
                Aggregate::Min
            } else if is(kind, "MAX") {
                Aggregate::Max
            } else {
                return Err(syntax());
            };
            i += 1;
        } else if !store && is(&words[i], "WITHSCORES") {
            with_scores = true;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    let mut loaded = Vec::with_capacity(numkeys);
    for key in sources {
        loaded.push(source(keys, key)?);
    }
    let weigh = |score: f64, weight: f64| {
        let product = score * weight;
        if product.is_nan() {
            0.0
        } else {
            product
        }
    };
    let mut result: IndexMap<Bytes, f64> = IndexMap::new();
    let mut loaded = loaded.into_iter().enumerate();
    if let Some((_, first)) = loaded.next() {
        for (member, score) in first.unwrap_or_default() {
            result.insert(member, if diff { score } else { weigh(score, weights[0]) });
        }
    }
    for (n, next) in loaded {
        let next = next.unwrap_or_default();
        if diff {
            for (member, _) in &next {
                result.shift_remove(member);
            }
        } else if inter {
            let scores: std::collections::HashMap<&Bytes, f64> = next.iter().map(|(m, s)| (m, *s)).collect();
            result.retain(|member, score| match scores.get(member) {
                Some(&other) => {
                    *score = aggregate.apply(*score, weigh(other, weights[n]));
                    true
                }
                None => false,
            });
        } else {
            for (member, score) in next {
                let score = weigh(score, weights[n]);
                let combined = match result.get(&member) {
                    Some(&old) => aggregate.apply(old, score),
                    None => score,
                };
                result.insert(member, combined);
            }
        }
    }
    let mut ordered: Vec<(f64, Bytes)> = result.into_iter().map(|(m, s)| (s, m)).collect();
    ordered.sort_by(|a, b| {
        a.0.partial_cmp(&b.0)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.1.cmp(&b.1))
    });
    if store {
        store_zset(keys, &words[1], ordered.iter().map(|(s, m)| (*s, &m[..])))?;
        return Ok(Reply::Integer(ordered.len() as i64));
    }
    Ok(pairs_reply(ordered, with_scores))
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit].
pub fn zintercard(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let numkeys = match crate::args::parse_i64(&words[1]) {
        Some(n) if n > 0 => n as usize,
        Some(_) => return Err(Reply::err("at least 1 input key is needed for 'zintercard' command")),
        None => return Err(crate::args::not_integer()),
    };
    if numkeys > words.len() - 2 {
        return Err(Reply::err("Number of keys can't be greater than number of args"));
    }
    let limit = match &words[2 + numkeys..] {
        [] => 0,
        [option, value] if is(option, "LIMIT") => crate::args::limit(value)?,
        _ => return Err(syntax()),
    };
    let mut members: Option<Vec<Bytes>> = None;
    let mut all = Vec::new();
    for key in &words[2..2 + numkeys] {
        all.push(source(keys, key)?);
    }
    for next in all {
        let next: std::collections::HashSet<Bytes> = next.unwrap_or_default().into_iter().map(|(m, _)| m).collect();
        members = Some(match members {
            None => next.into_iter().collect(),
            Some(current) => current.into_iter().filter(|m| next.contains(m)).collect(),
        });
    }
    let len = members.map_or(0, |m| m.len());
    Ok(Reply::Integer(if limit == 0 { len } else { len.min(limit) } as i64))
}

/// ZSCAN key cursor [MATCH pattern] [COUNT n].
pub fn zscan(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let args = scan_args(words, false)?;
    let Some(zset) = keys.read(&words[1], as_type::zset)? else {
        return Ok(scan_reply(&args, 0, std::iter::empty()));
    };
    let (next, members) = zset.scan(args.cursor, args.count);
    Ok(scan_reply(
        &args,
        next,
        members.into_iter().map(|(s, m)| (m, Some(format_f64(s)))),
    ))
}
