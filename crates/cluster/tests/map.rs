//! Cluster maps: good ones route every key to one owner, bad ones are refused with a
//! message that says what is wrong.

use ferry_cluster::{key_slot, ClusterMap, MapError, SLOTS};
use proptest::prelude::*;

const TWO: &str = r#"
[[node]]
id = "s1"
addr = "127.0.0.1:7701"
slots = ["0-8191"]

[[node]]
id = "s2"
addr = "127.0.0.1:7702"
slots = ["8192-16000", "16001-16383"]
"#;

#[test]
fn a_two_node_map_routes_by_slot() {
    let map = ClusterMap::parse(TWO).unwrap();
    assert_eq!(map.nodes().len(), 2);
    assert_eq!(map.owner_of_slot(0).id, "s1");
    assert_eq!(map.owner_of_slot(8191).id, "s1");
    assert_eq!(map.owner_of_slot(8192).id, "s2");
    assert_eq!(map.owner_of_slot(SLOTS - 1).id, "s2");
    // "foo" is slot 12182, "hello" 866.
    assert_eq!(map.owner(b"foo").addr, "127.0.0.1:7702");
    assert_eq!(map.owner(b"hello").addr, "127.0.0.1:7701");
    assert_eq!(map.owner(b"{user1}.a").id, map.owner(b"{user1}.b").id);
    assert_eq!(map.node("s2").unwrap().slots, vec![(8192, 16000), (16001, 16383)]);
    assert!(map.node("s3").is_none());
}

fn refused(text: &str) -> MapError {
    ClusterMap::parse(text).expect_err("the map was accepted")
}

#[test]
fn bad_maps_are_refused_with_the_reason() {
    let gap = refused(&TWO.replace("16001-16383", "16001-16380"));
    assert_eq!(gap, MapError::Uncovered { from: 16381, to: 16383 });
    assert!(gap.to_string().contains("16381-16383"), "{gap}");
    let overlap = refused(&TWO.replace("8192-16000", "8000-16000"));
    assert_eq!(
        overlap,
        MapError::Overlap {
            slot: 8000,
            first: "s1".into(),
            second: "s2".into()
        }
    );
    assert!(matches!(
        refused(&TWO.replace("0-8191", "0-16384")),
        MapError::Node { .. }
    ));
    assert!(matches!(
        refused(&TWO.replace("0-8191", "8191-0")),
        MapError::Node { .. }
    ));
    assert!(matches!(refused(&TWO.replace("0-8191", "zero")), MapError::Node { .. }));
    assert!(matches!(
        refused(&TWO.replace("\"s2\"", "\"s1\"")),
        MapError::Node { .. }
    ));
    assert!(matches!(
        refused(&TWO.replace("127.0.0.1:7702", "nowhere")),
        MapError::Node { .. }
    ));
    assert!(matches!(refused(&TWO.replace(":7702", ":0")), MapError::Node { .. }));
    assert!(matches!(
        refused(&TWO.replace("id = \"s1\"", "id = \"\"")),
        MapError::Node { .. }
    ));
    assert!(matches!(refused("[[node]]\nid = 1"), MapError::Syntax(_)));
    assert!(matches!(refused("colour = \"blue\""), MapError::Syntax(_)));
    assert!(matches!(refused(""), MapError::Syntax(_)));
    assert!(matches!(refused("not toml at all ["), MapError::Syntax(_)));
}

#[test]
fn an_even_map_covers_every_slot_in_equal_ranges() {
    for n in 1..=7usize {
        let addrs: Vec<String> = (0..n).map(|i| format!("127.0.0.1:{}", 7701 + i)).collect();
        let map = ClusterMap::even(&addrs).unwrap();
        let sizes: Vec<u32> = map
            .nodes()
            .iter()
            .map(|node| node.slots.iter().map(|&(lo, hi)| u32::from(hi - lo) + 1).sum())
            .collect();
        assert_eq!(sizes.iter().sum::<u32>(), u32::from(SLOTS));
        assert!(
            sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1,
            "{sizes:?}"
        );
    }
}

proptest! {
    #[test]
    fn every_key_has_exactly_the_owner_of_its_slot(key in proptest::collection::vec(any::<u8>(), 0..40)) {
        let map = ClusterMap::parse(TWO).unwrap();
        let slot = key_slot(&key);
        prop_assert!(slot < SLOTS);
        let owner = &map.owner(&key).id;
        let expected = if slot <= 8191 { "s1" } else { "s2" };
        prop_assert_eq!(owner, expected);
    }
}

#[test]
fn the_written_map_reads_back_the_same() {
    let addrs: Vec<String> = (0..3).map(|i| format!("127.0.0.1:77{i:02}")).collect();
    let map = ClusterMap::even(&addrs).unwrap();
    assert_eq!(ClusterMap::parse(&map.to_toml()).unwrap(), map);
    // With RESP addresses too.
    let mut nodes = map.nodes().to_vec();
    nodes[1].resp = Some("127.0.0.1:6380".into());
    let map = ClusterMap::new(nodes).unwrap();
    assert_eq!(ClusterMap::parse(&map.to_toml()).unwrap(), map);
    let mut bad = map.nodes().to_vec();
    bad[0].resp = Some("nowhere".into());
    assert!(ClusterMap::new(bad).is_err());
}
