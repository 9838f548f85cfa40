//! A packed sequence of byte strings in one buffer: Redis's listpack idea. Each entry is
//! its length (LEB128), its bytes, and its length again with the LEB128 bytes reversed,
//! so the sequence walks from either end without an index. A 10-byte string takes 12
//! bytes and the whole sequence one allocation: the small encodings of hashes, sets and
//! sorted sets are one pack, and a large list is a run of them.
//!
//! Every operation that finds an entry walks to it (from the nearer end), so a pack is
//! for the sizes its owners cap it at (a few hundred entries, a few KiB).

use crate::Blob;

/// A packed sequence of byte strings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pack {
    buf: Vec<u8>,
    count: usize,
}

/// Bytes `n` takes as LEB128.
fn varint_len(mut n: usize) -> usize {
    let mut bytes = 1;
    while n >= 0x80 {
        n >>= 7;
        bytes += 1;
    }
    bytes
}

/// The bytes one entry of `len` bytes takes in a pack.
pub fn entry_bytes(len: usize) -> usize {
    2 * varint_len(len) + len
}

/// Writes `n` as LEB128 into `out` (exactly `varint_len(n)` bytes), reversed if `back`.
fn put_varint(out: &mut [u8], mut n: usize, back: bool) {
    let len = out.len();
    for i in 0..len {
        let byte = (n as u8 & 0x7f) | if i + 1 < len { 0x80 } else { 0 };
        n >>= 7;
        if back {
            out[len - 1 - i] = byte;
        } else {
            out[i] = byte;
        }
    }
}

/// Reads a LEB128 length at `at` forwards: (length, bytes it took).
fn read_forward(buf: &[u8], at: usize) -> (usize, usize) {
    let first = buf[at];
    if first < 0x80 {
        return (first as usize, 1);
    }
    let (mut n, mut used, mut shift) = (0usize, 0usize, 0u32);
    loop {
        let byte = buf[at + used];
        n |= usize::from(byte & 0x7f) << shift;
        used += 1;
        shift += 7;
        if byte & 0x80 == 0 {
            return (n, used);
        }
    }
}

/// Reads the reversed LEB128 length that ends at `end`: (length, bytes it took).
fn read_backward(buf: &[u8], end: usize) -> (usize, usize) {
    let first = buf[end - 1];
    if first < 0x80 {
        return (first as usize, 1);
    }
    let (mut n, mut used, mut shift) = (0usize, 0usize, 0u32);
    loop {
        let byte = buf[end - 1 - used];
        n |= usize::from(byte & 0x7f) << shift;
        used += 1;
        shift += 7;
        if byte & 0x80 == 0 {
            return (n, used);
        }
    }
}

impl Pack {
    /// An empty pack.
    pub fn new() -> Pack {
        Pack::default()
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of its buffer in use.
    pub fn byte_len(&self) -> usize {
        self.buf.len()
    }

    /// Bytes its buffer holds allocated (what it costs in memory).
    pub fn capacity_bytes(&self) -> usize {
        self.buf.capacity()
    }

    /// The entry starting at `offset`: its bytes and the offset after it.
    fn entry_at(&self, offset: usize) -> (&[u8], usize) {
        let (len, used) = read_forward(&self.buf, offset);
        let start = offset + used;
        let end = start + len;
        (&self.buf[start..end], end + varint_len(len))
    }

    /// The offset where entry `index` starts (`index == len`: the end), walked from the
    /// nearer end.
    fn offset_of(&self, index: usize) -> usize {
        debug_assert!(index <= self.count);
        if index <= self.count / 2 {
            let mut offset = 0;
            for _ in 0..index {
                offset = self.entry_at(offset).1;
            }
            offset
        } else {
            let mut end = self.buf.len();
            for _ in index..self.count {
                let (len, used) = read_backward(&self.buf, end);
                end -= used + len + varint_len(len);
            }
            end
        }
    }

    /// Entry `index`.
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        (index < self.count).then(|| self.entry_at(self.offset_of(index)).0)
    }

    /// The first entry.
    pub fn first(&self) -> Option<&[u8]> {
        self.get(0)
    }

    /// The last entry.
    pub fn last(&self) -> Option<&[u8]> {
        if self.count == 0 {
            return None;
        }
        let end = self.buf.len();
        let (len, used) = read_backward(&self.buf, end);
        Some(&self.buf[end - used - len..end - used])
    }

    /// Entries from the first.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            pack: self,
            offset: 0,
            end: self.buf.len(),
            left: self.count,
        }
    }

    /// Entries from index `from` on.
    pub fn iter_from(&self, from: usize) -> Iter<'_> {
        let from = from.min(self.count);
        Iter {
            pack: self,
            offset: self.offset_of(from),
            end: self.buf.len(),
            left: self.count - from,
        }
    }

    /// The first `n` entries (at most `len`), walkable from either end.
    pub fn iter_until(&self, n: usize) -> Iter<'_> {
        let n = n.min(self.count);
        Iter {
            pack: self,
            offset: 0,
            end: self.offset_of(n),
            left: n,
        }
    }

    /// Inserts `bytes` as entry `index` (at most `len`).
    pub fn insert(&mut self, index: usize, bytes: &[u8]) {
        let offset = self.offset_of(index);
        self.insert_at_offset(offset, bytes);
    }

    fn insert_at_offset(&mut self, offset: usize, bytes: &[u8]) {
        let head = varint_len(bytes.len());
        let size = 2 * head + bytes.len();
        let tail = self.buf.len() - offset;
        self.buf.resize(self.buf.len() + size, 0);
        self.buf.copy_within(offset..offset + tail, offset + size);
        put_varint(&mut self.buf[offset..offset + head], bytes.len(), false);
        self.buf[offset + head..offset + head + bytes.len()].copy_from_slice(bytes);
        put_varint(
            &mut self.buf[offset + head + bytes.len()..offset + size],
            bytes.len(),
            true,
        );
        self.count += 1;
    }

    /// Appends an entry.
    pub fn push_back(&mut self, bytes: &[u8]) {
        let head = varint_len(bytes.len());
        let start = self.buf.len();
        self.buf.resize(start + head, 0);
        put_varint(&mut self.buf[start..], bytes.len(), false);
        self.buf.extend_from_slice(bytes);
        let start = self.buf.len();
        self.buf.resize(start + head, 0);
        put_varint(&mut self.buf[start..], bytes.len(), true);
        self.count += 1;
    }

    /// Prepends an entry.
    pub fn push_front(&mut self, bytes: &[u8]) {
        self.insert_at_offset(0, bytes);
    }

    /// Removes entry `index` (below `len`) and returns it.
    pub fn remove(&mut self, index: usize) -> Blob {
        let offset = self.offset_of(index);
        let (bytes, next) = self.entry_at(offset);
        let removed = Blob::from_slice(bytes);
        self.buf.drain(offset..next);
        self.count -= 1;
        removed
    }

    /// Removes the first entry.
    pub fn pop_front(&mut self) -> Option<Blob> {
        (self.count > 0).then(|| self.remove(0))
    }

    /// Removes the last entry.
    pub fn pop_back(&mut self) -> Option<Blob> {
        if self.count == 0 {
            return None;
        }
        let end = self.buf.len();
        let (len, used) = read_backward(&self.buf, end);
        let start = end - used - len - varint_len(len);
        let removed = Blob::from_slice(&self.buf[end - used - len..end - used]);
        self.buf.truncate(start);
        self.count -= 1;
        Some(removed)
    }

    /// Replaces entry `index` (below `len`) with `bytes`; what it was.
    pub fn replace(&mut self, index: usize, bytes: &[u8]) -> Blob {
        let offset = self.offset_of(index);
        let (old, next) = self.entry_at(offset);
        let removed = Blob::from_slice(old);
        if old.len() == bytes.len() {
            let head = varint_len(bytes.len());
            self.buf[offset + head..offset + head + bytes.len()].copy_from_slice(bytes);
        } else {
            self.buf.drain(offset..next);
            self.count -= 1;
            self.insert_at_offset(offset, bytes);
        }
        removed
    }

    /// The index of the first entry for which `matches` holds.
    pub fn position(&self, matches: impl FnMut(&[u8]) -> bool) -> Option<usize> {
        self.iter().position(matches)
    }

    /// Splits off the entries from `index` on into a pack of their own.
    pub fn split_off(&mut self, index: usize) -> Pack {
        let offset = self.offset_of(index);
        let rest = Pack {
            buf: self.buf.split_off(offset),
            count: self.count - index,
        };
        self.count = index;
        rest
    }

    /// Appends every entry of `other`.
    pub fn append(&mut self, other: Pack) {
        self.buf.extend_from_slice(&other.buf);
        self.count += other.count;
    }

    /// Gives back buffer space beyond what it holds.
    pub fn shrink_to_fit(&mut self) {
        self.buf.shrink_to_fit();
    }
}

/// The entries of a pack, in order (and from the back).
pub struct Iter<'a> {
    pack: &'a Pack,
    offset: usize,
    end: usize,
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        let (len, used) = read_forward(&self.pack.buf, self.offset);
        let start = self.offset + used;
        self.offset = start + len + varint_len(len);
        self.left -= 1;
        Some(&self.pack.buf[start..start + len])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let (len, used) = read_backward(&self.pack.buf, self.end);
        let stop = self.end - used;
        self.end = stop - len - varint_len(len);
        self.left -= 1;
        Some(&self.pack.buf[stop - len..stop])
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn entries_walk_from_both_ends() {
        let mut pack = Pack::new();
        let long = vec![b'x'; 300];
        pack.push_back(b"a");
        pack.push_back(&long);
        pack.push_front(b"");
        assert_eq!(pack.len(), 3);
        assert_eq!(pack.byte_len(), 2 + 3 + (2 * 2 + 300));
        let forward: Vec<&[u8]> = pack.iter().collect();
        assert_eq!(forward, vec![&b""[..], b"a", &long[..]]);
        let backward: Vec<&[u8]> = pack.iter().rev().collect();
        assert_eq!(backward, vec![&long[..], b"a", &b""[..]]);
        assert_eq!(pack.get(2), Some(&long[..]));
        assert_eq!(pack.last(), Some(&long[..]));
        assert_eq!(pack.replace(1, b"bigger"), Blob::from_slice(b"a"));
        assert_eq!(pack.pop_back().unwrap().as_slice(), &long[..]);
        assert_eq!(pack.pop_front().unwrap().as_slice(), b"");
        assert_eq!(pack.iter().collect::<Vec<_>>(), vec![&b"bigger"[..]]);
    }

    #[derive(Clone, Debug)]
    enum Op {
        PushBack(Vec<u8>),
        PushFront(Vec<u8>),
        Insert(usize, Vec<u8>),
        Remove(usize),
        Replace(usize, Vec<u8>),
        PopBack,
        PopFront,
        Split(usize),
    }

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..20),
            proptest::collection::vec(any::<u8>(), 100..300),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            bytes().prop_map(Op::PushBack),
            bytes().prop_map(Op::PushFront),
            (any::<usize>(), bytes()).prop_map(|(i, b)| Op::Insert(i, b)),
            any::<usize>().prop_map(Op::Remove),
            (any::<usize>(), bytes()).prop_map(|(i, b)| Op::Replace(i, b)),
            Just(Op::PopBack),
            Just(Op::PopFront),
            any::<usize>().prop_map(Op::Split),
        ]
    }

    proptest! {
        /// A pack behaves as a vector of byte strings, whatever the operations.
        #[test]
        fn a_pack_is_a_vector_of_strings(ops in proptest::collection::vec(op(), 0..60)) {
            let mut pack = Pack::new();
            let mut model: Vec<Vec<u8>> = Vec::new();
            for op in ops {
                match op {
                    Op::PushBack(b) => { pack.push_back(&b); model.push(b); }
                    Op::PushFront(b) => { pack.push_front(&b); model.insert(0, b); }
                    Op::Insert(i, b) => { let i = i % (model.len() + 1); pack.insert(i, &b); model.insert(i, b); }
                    Op::Remove(i) if !model.is_empty() => {
                        let i = i % model.len();
                        prop_assert_eq!(pack.remove(i).to_vec(), model.remove(i));
                    }
                    Op::Replace(i, b) if !model.is_empty() => {
                        let i = i % model.len();
                        let old = std::mem::replace(&mut model[i], b.clone());
                        prop_assert_eq!(pack.replace(i, &b).to_vec(), old);
                    }
                    Op::PopBack => prop_assert_eq!(pack.pop_back().map(|b| b.to_vec()), model.pop()),
                    Op::PopFront => {
                        let expected = (!model.is_empty()).then(|| model.remove(0));
                        prop_assert_eq!(pack.pop_front().map(|b| b.to_vec()), expected);
                    }
                    Op::Split(i) => {
                        let i = i % (model.len() + 1);
                        let rest = pack.split_off(i);
                        let model_rest = model.split_off(i);
                        prop_assert_eq!(rest.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), model_rest.clone());
                        pack.append(rest);
                        model.extend(model_rest);
                    }
                    _ => {}
                }
                prop_assert_eq!(pack.len(), model.len());
                prop_assert_eq!(pack.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), model.clone());
                let mut reversed: Vec<Vec<u8>> = pack.iter().rev().map(<[u8]>::to_vec).collect();
                reversed.reverse();
                prop_assert_eq!(&reversed, &model);
                for (i, entry) in model.iter().enumerate() {
                    prop_assert_eq!(pack.get(i), Some(&entry[..]));
                    prop_assert_eq!(pack.iter_from(i).next(), Some(&entry[..]));
                    prop_assert_eq!(pack.iter_until(i + 1).next_back(), Some(&entry[..]));
                }
                prop_assert_eq!(pack.byte_len(), model.iter().map(|e| entry_bytes(e.len())).sum::<usize>());
            }
        }
    }
}
