//! Cursors over a table's positions for HSCAN and SSCAN.
//!
//! A table (`indexmap`) keeps its entries at positions 0..len, and a removal fills the
//! hole with the last entry, so an entry only ever moves to a lower position. A scan that
//! walks positions downwards, from the top, therefore never skips an entry present for
//! the whole scan: one not visited yet is below the cursor and stays below it. It may
//! visit an entry twice (moved down past the cursor), as Redis's scans may.

/// The positions one scan step visits, from `cursor` (0: the start, at the top of `len`
/// positions) down, about `count` of them; and the next cursor (0: done). A cursor past
/// the end (entries removed since) starts at the top.
pub fn downwards(cursor: u64, count: usize, len: usize) -> (u64, impl Iterator<Item = usize>) {
    let top = match usize::try_from(cursor) {
        Ok(0) | Err(_) => len,
        Ok(cursor) => cursor.min(len),
    };
    let bottom = top.saturating_sub(count.max(1));
    ((bottom as u64), (bottom..top).rev())
}

#[cfg(test)]
mod tests {
    use indexmap::IndexSet;

    use super::*;

    #[test]
    fn a_member_present_throughout_is_visited_whatever_is_removed_or_added() {
        let mut set: IndexSet<u32> = (0..100).collect();
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut step = 0u32;
        loop {
            let (next, positions) = downwards(cursor, 7, set.len());
            let visited: Vec<u32> = positions.filter_map(|at| set.get_index(at).copied()).collect();
            seen.extend(visited);
            // Churn between steps: members 0..50 come and go; 50..100 stay.
            set.swap_remove(&(step % 50));
            set.insert(1000 + step);
            step += 1;
            if next == 0 {
                break;
            }
            cursor = next;
        }
        assert!(
            (50..100).all(|m| seen.contains(&m)),
            "a member present throughout was skipped"
        );
        assert!(step <= 20, "{step} steps for 100 members at 7 a step");
    }
}
