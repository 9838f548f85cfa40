//! HSCAN, SSCAN and ZSCAN over large collections go a step at a time and, whatever is
//! added and removed between steps, return every element present for the whole scan;
//! compact ones come back whole with cursor 0.

use bytes::Bytes;
use ferry_keyspace::{Keys, Slot};
use ferry_resp::Reply;
use ferry_value::DEFAULT_ENCODINGS;

fn words(text: &str) -> Vec<Bytes> {
    text.split(' ').map(|w| Bytes::from(w.to_owned())).collect()
}

fn run(slots: &mut [Slot], text: &str) -> Reply {
    let mut keys = Keys::new(slots, 0, 1, DEFAULT_ENCODINGS, true);
    ferry_keyspace::run(&words(text), &mut keys)
}

/// The cursor and elements of a scan step's reply (every element, values left out when
/// `pairs`).
fn step(reply: Reply, pairs: bool) -> (String, Vec<String>) {
    let Reply::Array(parts) = reply else {
        panic!("{reply:?}")
    };
    let (Reply::Bulk(cursor), Reply::Array(items)) = (&parts[0], &parts[1]) else {
        panic!("{parts:?}")
    };
    let texts: Vec<String> = items
        .iter()
        .map(|item| match item {
            Reply::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    let elements = if pairs {
        texts.chunks(2).map(|pair| pair[0].clone()).collect()
    } else {
        texts
    };
    (String::from_utf8(cursor.to_vec()).unwrap(), elements)
}

#[test]
fn a_scan_of_a_large_collection_misses_nothing_present_throughout() {
    for (fill, scan, churn_add, churn_remove, pairs) in [
        (
            "HSET k {} v",
            "HSCAN k {} COUNT 10",
            "HSET k new{} v",
            "HDEL k {}",
            true,
        ),
        ("SADD k {}", "SSCAN k {} COUNT 10", "SADD k new{}", "SREM k {}", false),
        (
            "ZADD k 1 {}",
            "ZSCAN k {} COUNT 10",
            "ZADD k 2 new{}",
            "ZREM k {}",
            true,
        ),
    ] {
        let mut slots = [Slot::new(Bytes::from_static(b"k"), None)];
        for i in 0..1000 {
            run(&mut slots, &fill.replace("{}", &format!("m{i}")));
        }
        let mut seen = std::collections::HashSet::new();
        let (mut cursor, mut steps) = ("0".to_string(), 0);
        loop {
            let (next, elements) = step(run(&mut slots, &scan.replace("{}", &cursor)), pairs);
            seen.extend(elements);
            // Members m0..m299 come and go; the others stay for the whole scan.
            run(&mut slots, &churn_remove.replace("{}", &format!("m{}", steps % 300)));
            run(&mut slots, &churn_add.replace("{}", &steps.to_string()));
            steps += 1;
            if next == "0" {
                break;
            }
            cursor = next;
        }
        for i in 300..1000 {
            assert!(seen.contains(&format!("m{i}")), "{scan}: m{i} missed");
        }
        assert!((90..300).contains(&steps), "{scan}: {steps} steps of about 10");
    }
}

#[test]
fn a_compact_collection_comes_back_whole_and_options_filter() {
    let mut slots = [Slot::new(Bytes::from_static(b"h"), None)];
    run(&mut slots, "HSET h a 1 b 2 ab 3");
    assert_eq!(
        step(run(&mut slots, "HSCAN h 0"), true),
        ("0".into(), vec!["a".into(), "b".into(), "ab".into()])
    );
    let (_, only) = step(run(&mut slots, "HSCAN h 0 MATCH a* NOVALUES"), false);
    assert_eq!(only, ["a", "ab"]);
    for bad in ["HSCAN h x", "HSCAN h 0 COUNT 0", "HSCAN h 0 BOGUS"] {
        assert!(matches!(run(&mut slots, bad), Reply::Error(_)), "{bad}");
    }
}
