//! The data commands give the same answers whatever encodings hold the values, and the
//! changes they record, replayed on a copy of the values before them, give the values
//! after them: a random run of commands over a few keys, once with Redis's default
//! thresholds and once with thresholds so small every collection goes through its
//! conversions, the changes of every command replayed on a third copy.

use std::collections::HashMap;

use bytes::Bytes;
use ferry_keyspace::{Keys, Slot};
use ferry_resp::Reply;
use ferry_value::{Encodings, Entry, DEFAULT_ENCODINGS};

/// Commands per run.
const COMMANDS: usize = 4_000;

/// A store of entries by key, as the storage node holds them.
#[derive(Default)]
struct Store(HashMap<Bytes, Entry>);

impl Store {
    /// Runs `words` at `now_us` under `encodings`: the reply and the changes made.
    fn run(
        &mut self,
        words: &[Bytes],
        now_us: u64,
        encodings: Encodings,
    ) -> (Reply, Vec<(Bytes, Vec<ferry_value::Change>)>) {
        let mut slots: Vec<Slot> = Vec::new();
        for key in ferry_resp::table::keys_of(words) {
            if !slots.iter().any(|slot| slot.key == key) {
                let entry = self.0.remove(&key);
                slots.push(Slot::new(key, entry));
            }
        }
        let reply = {
            let mut keys = Keys::new(&mut slots, now_us, 7, encodings, true);
            ferry_keyspace::run(words, &mut keys)
        };
        let mut changes = Vec::new();
        for slot in slots {
            let key = slot.key.clone();
            let (entry, made) = slot.tracked.into_parts();
            if !made.is_empty() {
                changes.push((key.clone(), made));
            }
            if let Some(entry) = entry {
                self.0.insert(key, entry);
            }
        }
        (reply, changes)
    }

    /// Applies recorded changes, as a replay of the log does.
    fn replay(&mut self, changes: &[(Bytes, Vec<ferry_value::Change>)], encodings: &Encodings) {
        for (key, made) in changes {
            let mut entry = self.0.remove(key);
            for change in made {
                change.apply(&mut entry, encodings).expect("a logged change applies");
            }
            if let Some(entry) = entry {
                self.0.insert(key.clone(), entry);
            }
        }
    }
}

/// A deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// A command over the test's keys, as words.
fn command(rng: &mut Rng) -> Vec<String> {
    let n = |rng: &mut Rng, max: u64| rng.below(max).to_string();
    let member = |rng: &mut Rng| match rng.below(4) {
        0 => rng.below(20).to_string(),
        1 => format!("m{}", rng.below(30)),
        2 => format!("a-member-name-of-some-length-{}", rng.below(10)),
        _ => format!("x{}", rng.below(8)),
    };
    let text: String = match rng.below(40) {
        0 => format!("HSET h f{} v{}", n(rng, 40), member(rng)),
        1 => format!("HSET h f{} {} f{} 1", n(rng, 40), member(rng), n(rng, 40)),
        2 => format!("HDEL h f{} f{}", n(rng, 40), n(rng, 40)),
        3 => format!("HINCRBY h n{} 3", n(rng, 3)),
        4 => format!("HGET h f{}", n(rng, 40)),
        5 => "HGETALL h".into(),
        6 => "HLEN h".into(),
        7 => format!("LPUSH l {} {}", member(rng), member(rng)),
        8 => format!("RPUSH l {}", member(rng)),
        9 => format!("LPOP l {}", n(rng, 3)),
        10 => "RPOP l".into(),
        11 => format!("LRANGE l {} -{}", n(rng, 10), n(rng, 10)),
        12 => format!("LINDEX l -{}", n(rng, 12)),
        13 => format!("LSET l {} {}", n(rng, 20), member(rng)),
        14 => format!(
            "LINSERT l {} {} {}",
            if rng.below(2) == 0 { "BEFORE" } else { "AFTER" },
            member(rng),
            member(rng)
        ),
        15 => format!("LREM l {} {}", rng.below(5) as i64 - 2, member(rng)),
        16 => format!("LTRIM l {} -{}", n(rng, 3), 1 + rng.below(3)),
        17 => format!("LPOS l {} RANK -1 COUNT 0", member(rng)),
        18 => format!("LMOVE l l2 LEFT {}", if rng.below(2) == 0 { "LEFT" } else { "RIGHT" }),
        19 => format!("SADD s {} {}", member(rng), member(rng)),
        20 => format!("SREM s {}", member(rng)),
        21 => format!("SISMEMBER s {}", member(rng)),
        22 => "SMEMBERS s".into(),
        23 => "SCARD s".into(),
        24 => format!("SADD s2 {} {}", member(rng), member(rng)),
        25 => ["SINTER s s2", "SUNIONSTORE s3 s s2", "SDIFF s s2", "SINTERCARD 2 s s2"][rng.below(4) as usize].into(),
        26 => format!("SMOVE s s2 {}", member(rng)),
        27 => format!(
            "ZADD z {} {} {} {}",
            rng.below(9) as i64 - 4,
            member(rng),
            rng.below(9),
            member(rng)
        ),
        28 => format!("ZADD z GT CH {} {}", rng.below(9), member(rng)),
        29 => format!("ZINCRBY z 2 {}", member(rng)),
        30 => format!("ZREM z {}", member(rng)),
        31 => "ZRANGE z 0 -1 WITHSCORES".into(),
        32 => format!("ZRANGEBYSCORE z ({} +inf LIMIT 1 3", rng.below(5)),
        33 => format!("ZREVRANK z {}", member(rng)),
        34 => format!("ZCOUNT z -2 ({}", rng.below(6)),
        35 => [
            "ZPOPMIN z",
            "ZPOPMAX z 2",
            "ZREMRANGEBYRANK z 0 0",
            "ZUNIONSTORE z3 2 z s",
        ][rng.below(4) as usize]
            .into(),
        36 => format!("ZRANGE z {} {} REV", n(rng, 4), n(rng, 8)),
        37 => format!("APPEND str {}", member(rng)),
        38 => [
            "INCR n",
            "GET str",
            "EXPIRE l 100",
            "PERSIST l",
            "TTL l",
            "TYPE s3",
            "DEL l2",
        ][rng.below(7) as usize]
            .into(),
        _ => format!("RENAME s3 z{}", n(rng, 2)),
    };
    text.split(' ').map(String::from).collect()
}

/// A reply with the order of unordered collections (members of a hash or set) left out.
fn normalized(words: &[String], reply: Reply) -> Reply {
    let unordered = ["HGETALL", "SMEMBERS", "SINTER", "SDIFF"].contains(&words[0].as_str());
    match reply {
        Reply::Array(mut items) if unordered => {
            items.sort_by_key(|item| format!("{item:?}"));
            Reply::Array(items)
        }
        Reply::Map(mut pairs) if unordered => {
            pairs.sort_by_key(|pair| format!("{pair:?}"));
            Reply::Map(pairs)
        }
        other => other,
    }
}

#[test]
fn every_encoding_answers_the_same_and_logged_changes_replay() {
    let tiny = Encodings {
        hash_max_listpack_entries: 2,
        hash_max_listpack_value: 4,
        set_max_intset_entries: 2,
        set_max_listpack_entries: 3,
        set_max_listpack_value: 4,
        zset_max_listpack_entries: 2,
        zset_max_listpack_value: 4,
        list_max_listpack_size: 2,
    };
    for seed in [1u64, 99, 2024] {
        let mut rng = Rng(seed);
        let (mut wide, mut small, mut replica) = (Store::default(), Store::default(), Store::default());
        for step in 0..COMMANDS {
            let words = command(&mut rng);
            let bytes: Vec<Bytes> = words.iter().map(|w| Bytes::from(w.clone())).collect();
            let now_us = 1_000_000 * step as u64;
            let (wide_reply, _) = wide.run(&bytes, now_us, DEFAULT_ENCODINGS);
            let (small_reply, changes) = small.run(&bytes, now_us, tiny);
            assert_eq!(
                normalized(&words, wide_reply),
                normalized(&words, small_reply),
                "seed {seed}, step {step}: {words:?}"
            );
            replica.replay(&changes, &tiny);
            assert_eq!(replica.0, small.0, "seed {seed}, step {step}: replay of {words:?}");
        }
        assert_eq!(wide.0, small.0, "seed {seed}: the same values at the end");
        let encodings: std::collections::BTreeSet<&str> = small.0.values().map(|e| e.value.encoding()).collect();
        assert!(
            encodings.len() >= 3,
            "the small run reached large encodings: {encodings:?}"
        );
    }
}
