//! A list: a run of [`Pack`] nodes, each holding at most `list-max-listpack-size` (bytes
//! or items), so a push or pop touches one node (Redis's `quicklist`). A list that fits
//! one node is Redis's `listpack`; it becomes a quicklist when it outgrows the node and a
//! listpack again once it is back to one node at half the limit, as Redis 7.2 does.

use std::collections::VecDeque;

use crate::encodings::{list_node_limits, Encodings};
use crate::pack::{entry_bytes, Pack};
use crate::Blob;

/// Bytes a node costs besides its entries (its slot in the run, the buffer's header).
const NODE_OVERHEAD_BYTES: usize = 48;

/// A list's items.
#[derive(Clone, Debug, Default)]
pub struct List {
    nodes: VecDeque<Pack>,
    len: usize,
    /// The nodes' bytes, kept as they change: a command charges a list's memory before
    /// and after it, so this must not walk the nodes.
    node_bytes: usize,
    /// Past one node once, and not back at half the limit since: Redis's quicklist.
    quick: bool,
}

impl PartialEq for List {
    fn eq(&self, other: &List) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl List {
    /// An empty list.
    pub fn new() -> List {
        List::default()
    }

    /// A list of `items`, in order.
    pub fn from_items<'a>(items: impl Iterator<Item = &'a [u8]>, encodings: &Encodings) -> List {
        let mut list = List::new();
        for item in items {
            list.push(false, item, encodings);
        }
        list
    }

    /// Items.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no item.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// OBJECT ENCODING's name for how it is held.
    pub fn encoding(&self) -> &'static str {
        if self.quick {
            "quicklist"
        } else {
            "listpack"
        }
    }

    /// Bytes it holds in memory, estimated from its nodes: O(1).
    pub fn memory_bytes(&self) -> usize {
        self.node_bytes + self.nodes.len() * NODE_OVERHEAD_BYTES
    }

    /// Runs `change` on node `at`, keeping the byte count.
    fn on_node<T>(&mut self, at: usize, change: impl FnOnce(&mut Pack) -> T) -> T {
        let node = &mut self.nodes[at];
        self.node_bytes -= node.byte_len();
        let out = change(node);
        self.node_bytes += node.byte_len();
        out
    }

    /// Whether `node` takes one more item of `len` bytes under `encodings`.
    fn room(node: &Pack, len: usize, encodings: &Encodings) -> bool {
        let (max_bytes, max_items) = list_node_limits(encodings.list_max_listpack_size);
        node.is_empty() || (node.byte_len() + entry_bytes(len) <= max_bytes && node.len() < max_items)
    }

    /// Whether `node` holds more than one node should.
    fn over(node: &Pack, encodings: &Encodings) -> bool {
        let (max_bytes, max_items) = list_node_limits(encodings.list_max_listpack_size);
        node.len() > 1 && (node.byte_len() > max_bytes || node.len() > max_items)
    }

    /// Updates the encoding's name after a change.
    fn settle(&mut self, encodings: &Encodings) {
        let (max_bytes, max_items) = list_node_limits(encodings.list_max_listpack_size);
        match self.nodes.len() {
            0 => self.quick = false,
            1 => {
                let node = &self.nodes[0];
                if node.byte_len() > max_bytes || node.len() > max_items {
                    self.quick = true;
                } else if self.quick && node.byte_len() <= max_bytes / 2 && node.len() <= max_items / 2 {
                    self.quick = false;
                }
            }
            _ => self.quick = true,
        }
    }

    /// Pushes `item` at the head (`left`) or the tail.
    pub fn push(&mut self, left: bool, item: &[u8], encodings: &Encodings) {
        let end = if left { self.nodes.front() } else { self.nodes.back() };
        if !end.is_some_and(|node| List::room(node, item.len(), encodings)) {
            if left {
                self.nodes.push_front(Pack::new());
            } else {
                self.nodes.push_back(Pack::new());
            }
        }
        if left {
            self.on_node(0, |node| node.push_front(item));
        } else {
            let last = self.nodes.len() - 1;
            self.on_node(last, |node| node.push_back(item));
        }
        self.len += 1;
        self.settle(encodings);
    }

    /// Pops the head (`left`) or tail item.
    pub fn pop(&mut self, left: bool, encodings: &Encodings) -> Option<Blob> {
        let last = self.nodes.len().checked_sub(1)?;
        let at = if left { 0 } else { last };
        let item = self.on_node(at, |node| if left { node.pop_front() } else { node.pop_back() })?;
        if self.nodes[at].is_empty() {
            self.nodes.remove(at);
        }
        self.len -= 1;
        self.settle(encodings);
        Some(item)
    }

    /// The node holding item `index` (below `len`) and its position there, found from the
    /// nearer end.
    fn locate(&self, index: usize) -> (usize, usize) {
        if index < self.len / 2 {
            let mut left = index;
            for (at, node) in self.nodes.iter().enumerate() {
                if left < node.len() {
                    return (at, left);
                }
                left -= node.len();
            }
        } else {
            let mut right = self.len - 1 - index;
            for (at, node) in self.nodes.iter().enumerate().rev() {
                if right < node.len() {
                    return (at, node.len() - 1 - right);
                }
                right -= node.len();
            }
        }
        unreachable!("index {index} below the length {}", self.len)
    }

    /// Item `index`.
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        if index >= self.len {
            return None;
        }
        let (node, at) = self.locate(index);
        self.nodes[node].get(at)
    }

    /// Replaces item `index` (below `len`); what it was.
    pub fn set(&mut self, index: usize, item: &[u8], encodings: &Encodings) -> Blob {
        let (node, at) = self.locate(index);
        let old = self.on_node(node, |pack| pack.replace(at, item));
        self.split_if_over(node, encodings);
        self.settle(encodings);
        old
    }

    /// Inserts `item` so that it becomes item `index` (at most `len`).
    pub fn insert(&mut self, index: usize, item: &[u8], encodings: &Encodings) {
        if index == 0 || index == self.len {
            return self.push(index == 0, item, encodings);
        }
        let (node, at) = self.locate(index);
        self.on_node(node, |pack| pack.insert(at, item));
        self.len += 1;
        self.split_if_over(node, encodings);
        self.settle(encodings);
    }

    /// Removes item `index` (below `len`); what it was.
    pub fn remove(&mut self, index: usize, encodings: &Encodings) -> Blob {
        let (node, at) = self.locate(index);
        let item = self.on_node(node, |pack| pack.remove(at));
        self.len -= 1;
        if self.nodes[node].is_empty() {
            self.nodes.remove(node);
        } else {
            self.merge_small(node, encodings);
        }
        self.settle(encodings);
        item
    }

    /// Splits node `node` in two while it holds more than a node should.
    fn split_if_over(&mut self, node: usize, encodings: &Encodings) {
        if List::over(&self.nodes[node], encodings) {
            let half = self.nodes[node].len() / 2;
            let rest = self.nodes[node].split_off(half);
            self.nodes.insert(node + 1, rest);
            self.split_if_over(node + 1, encodings);
            self.split_if_over(node, encodings);
        }
    }

    /// Merges node `node` into a neighbour when both fit in one node at half its limit,
    /// so removals in the middle do not leave a run of near-empty nodes.
    fn merge_small(&mut self, node: usize, encodings: &Encodings) {
        let (max_bytes, max_items) = list_node_limits(encodings.list_max_listpack_size);
        let fits =
            |a: &Pack, b: &Pack| a.byte_len() + b.byte_len() <= max_bytes / 2 && a.len() + b.len() <= max_items / 2;
        if node + 1 < self.nodes.len() && fits(&self.nodes[node], &self.nodes[node + 1]) {
            let next = self.nodes.remove(node + 1).expect("checked");
            self.nodes[node].append(next);
        } else if node > 0 && fits(&self.nodes[node - 1], &self.nodes[node]) {
            let this = self.nodes.remove(node).expect("checked");
            self.nodes[node - 1].append(this);
        }
    }

    /// Items from the head.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> + '_ {
        self.nodes.iter().flat_map(Pack::iter)
    }

    /// Items from index `from` (at most `len`) towards the tail.
    pub fn iter_from(&self, from: usize) -> impl Iterator<Item = &[u8]> + '_ {
        let (node, at) = if from >= self.len {
            (self.nodes.len(), 0)
        } else {
            self.locate(from)
        };
        self.nodes
            .iter()
            .skip(node)
            .enumerate()
            .flat_map(move |(n, pack)| pack.iter_from(if n == 0 { at } else { 0 }))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::encodings::DEFAULT_ENCODINGS;

    fn small() -> Encodings {
        Encodings {
            list_max_listpack_size: 4,
            ..DEFAULT_ENCODINGS
        }
    }

    #[test]
    fn a_list_is_a_listpack_until_it_outgrows_one_node() {
        let encodings = small();
        let mut list = List::new();
        for i in 0..4 {
            list.push(false, &[i], &encodings);
        }
        assert_eq!(list.encoding(), "listpack");
        list.push(true, b"x", &encodings);
        assert_eq!(list.encoding(), "quicklist");
        // Back to one node at half the limit: a listpack again.
        for _ in 0..3 {
            list.pop(true, &encodings);
        }
        assert_eq!(list.len(), 2);
        assert_eq!(list.encoding(), "listpack");
        let huge = vec![0u8; 10_000];
        let mut list = List::new();
        list.push(false, &huge, &DEFAULT_ENCODINGS);
        assert_eq!(list.encoding(), "quicklist", "one item past the node's bytes");
    }

    #[derive(Clone, Debug)]
    enum Op {
        Push(bool, Vec<u8>),
        Pop(bool),
        Set(usize, Vec<u8>),
        Insert(usize, Vec<u8>),
        Remove(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        let item = proptest::collection::vec(any::<u8>(), 0..12);
        prop_oneof![
            3 => (any::<bool>(), item.clone()).prop_map(|(l, i)| Op::Push(l, i)),
            1 => any::<bool>().prop_map(Op::Pop),
            1 => (any::<usize>(), item.clone()).prop_map(|(n, i)| Op::Set(n, i)),
            2 => (any::<usize>(), item).prop_map(|(n, i)| Op::Insert(n, i)),
            2 => any::<usize>().prop_map(Op::Remove),
        ]
    }

    proptest! {
        /// Whatever the node size, a list behaves as a double-ended queue with indexing.
        #[test]
        fn a_list_is_a_deque(ops in proptest::collection::vec(op(), 0..300), size in prop_oneof![Just(-1i64), Just(3), Just(1)]) {
            let encodings = Encodings { list_max_listpack_size: size, ..DEFAULT_ENCODINGS };
            let mut list = List::new();
            let mut model: VecDeque<Vec<u8>> = VecDeque::new();
            for op in ops {
                match op {
                    Op::Push(left, item) => {
                        list.push(left, &item, &encodings);
                        if left { model.push_front(item) } else { model.push_back(item) }
                    }
                    Op::Pop(left) => {
                        let expected = if left { model.pop_front() } else { model.pop_back() };
                        prop_assert_eq!(list.pop(left, &encodings).map(|b| b.to_vec()), expected);
                    }
                    Op::Set(n, item) if !model.is_empty() => {
                        let n = n % model.len();
                        let old = std::mem::replace(&mut model[n], item.clone());
                        prop_assert_eq!(list.set(n, &item, &encodings).to_vec(), old);
                    }
                    Op::Insert(n, item) => {
                        let n = n % (model.len() + 1);
                        list.insert(n, &item, &encodings);
                        model.insert(n, item);
                    }
                    Op::Remove(n) if !model.is_empty() => {
                        let n = n % model.len();
                        prop_assert_eq!(list.remove(n, &encodings).to_vec(), model.remove(n).unwrap());
                    }
                    _ => {}
                }
                prop_assert_eq!(list.len(), model.len());
                prop_assert_eq!(list.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), model.iter().cloned().collect::<Vec<_>>());
                prop_assert_eq!(list.iter().rev().map(<[u8]>::to_vec).collect::<Vec<_>>(), model.iter().rev().cloned().collect::<Vec<_>>());
                for (i, item) in model.iter().enumerate() {
                    prop_assert_eq!(list.get(i), Some(&item[..]));
                }
                if !model.is_empty() {
                    let from = model.len() / 3;
                    prop_assert_eq!(list.iter_from(from).map(<[u8]>::to_vec).collect::<Vec<_>>(), model.iter().skip(from).cloned().collect::<Vec<_>>());
                }
                prop_assert_eq!(list.node_bytes, list.nodes.iter().map(Pack::byte_len).sum::<usize>());
                let (max_bytes, max_items) = list_node_limits(size);
                for node in &list.nodes {
                    prop_assert!(!node.is_empty());
                    prop_assert!(node.len() == 1 || (node.byte_len() <= max_bytes && node.len() <= max_items));
                }
            }
        }
    }
}
