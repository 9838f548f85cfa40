//! The dependency graph of a history and its shortest cycle.
//!
//! Nodes are the judged invocations, plus one *barrier* per completion time: an invocation
//! points to the barrier of its completion, barriers point to the next one in time, and the
//! last barrier before an invocation began points to it. So "completed before the other
//! began" (real time) is a path, in O(n log n) edges instead of O(n²).

use std::collections::{HashMap, VecDeque};

use crate::history::{History, Index, Key, Outcome};

/// Most nodes of a strongly connected component searched for its shortest cycle from each
/// one: beyond it, the cycle reported is the shortest through the first ones.
pub const CYCLE_STARTS_MAX: usize = 1_000;

/// Why one node depends on another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The source wrote `key` at `from`, the target the next version `to`.
    Ww {
        /// The key.
        key: Key,
        /// The source's version.
        from: u64,
        /// The target's version.
        to: u64,
    },
    /// The source wrote `key` at `version`, which the target read.
    Wr {
        /// The key.
        key: Key,
        /// The version.
        version: u64,
    },
    /// The source read `key` at `read`, and the target wrote the next version `next`.
    Rw {
        /// The key.
        key: Key,
        /// The version read.
        read: u64,
        /// The next version.
        next: u64,
    },
    /// The source completed before the target began.
    Rt,
}

/// One dependency between two invocations (indices into the history).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edge {
    /// The invocation that must come first.
    pub from: usize,
    /// The invocation that must come after.
    pub to: usize,
    /// Why.
    pub kind: Kind,
}

impl Edge {
    /// The edge in words.
    pub fn describe(&self, h: &History) -> String {
        let (a, b) = (h.name(self.from), h.name(self.to));
        match &self.kind {
            Kind::Ww { key, from, to } => format!("{a} wrote {key} v{from}, {b} wrote the next v{to} (ww)"),
            Kind::Wr { key, version } => format!("{a} wrote {key} v{version}, which {b} read (wr)"),
            Kind::Rw { key, read, next } => format!("{a} read {key} v{read}, {b} wrote the next v{next} (rw)"),
            Kind::Rt => format!("{a} completed before {b} began (rt)"),
        }
    }
}

/// The graph over the judged invocations and the barriers.
pub struct Graph {
    /// Node → (target node, edge label: Some for an invocation-to-invocation edge).
    adj: Vec<Vec<(usize, Option<Edge>)>>,
    /// Node → the invocation it is, or None for a barrier.
    invocation: Vec<Option<usize>>,
}

impl Graph {
    pub(crate) fn build(h: &History, index: &Index) -> Graph {
        let mut node_of: HashMap<usize, usize> = HashMap::new();
        let mut invocation = Vec::new();
        for &i in &index.members {
            node_of.insert(i, invocation.len());
            invocation.push(Some(i));
        }
        let mut adj: Vec<Vec<(usize, Option<Edge>)>> = vec![Vec::new(); invocation.len()];
        let add = |adj: &mut Vec<Vec<(usize, Option<Edge>)>>, from: usize, to: usize, kind: Kind| {
            if from != to {
                adj[node_of[&from]].push((node_of[&to], Some(Edge { from, to, kind })));
            }
        };
        for &i in &index.members {
            let inv = &h.invocations[i];
            for (key, v) in &inv.writes {
                let Some(v) = v.or_else(|| index.inferred.get(&(i, key.clone())).copied()) else {
                    continue;
                };
                if let Some(next) = index.next_version(key, v) {
                    let w = index.writer[&(key.clone(), next)];
                    add(
                        &mut adj,
                        i,
                        w,
                        Kind::Ww {
                            key: key.clone(),
                            from: v,
                            to: next,
                        },
                    );
                }
            }
            for (key, v) in &inv.reads {
                if let Some(&w) = index.writer.get(&(key.clone(), *v)) {
                    add(
                        &mut adj,
                        w,
                        i,
                        Kind::Wr {
                            key: key.clone(),
                            version: *v,
                        },
                    );
                }
                if let Some(next) = index.next_version(key, *v) {
                    let w = index.writer[&(key.clone(), next)];
                    add(
                        &mut adj,
                        i,
                        w,
                        Kind::Rw {
                            key: key.clone(),
                            read: *v,
                            next,
                        },
                    );
                }
            }
        }
        // Real time through barriers: only invocations that completed (not unknown ones).
        let mut completions: Vec<(u64, usize)> = index
            .members
            .iter()
            .filter(|&&i| h.invocations[i].outcome == Outcome::Committed)
            .map(|&i| (h.invocations[i].complete_ns, i))
            .collect();
        completions.sort_unstable();
        let first_barrier = invocation.len();
        for (k, &(_, i)) in completions.iter().enumerate() {
            invocation.push(None);
            adj.push(Vec::new());
            adj[node_of[&i]].push((first_barrier + k, None));
            if k > 0 {
                adj[first_barrier + k - 1].push((first_barrier + k, None));
            }
        }
        for &i in &index.members {
            let began = h.invocations[i].invoke_ns;
            let before = completions.partition_point(|&(c, _)| c < began);
            if before > 0 {
                adj[first_barrier + before - 1].push((node_of[&i], None));
            }
        }
        Graph { adj, invocation }
    }

    /// A shortest cycle, as invocation-to-invocation edges (barrier paths become `rt`).
    pub fn shortest_cycle(&self) -> Option<Vec<Edge>> {
        let comp = self.components();
        let mut members: HashMap<usize, Vec<usize>> = HashMap::new();
        for (n, &c) in comp.iter().enumerate() {
            members.entry(c).or_default().push(n);
        }
        let mut best: Option<Vec<(usize, usize, Option<Edge>)>> = None;
        for nodes in members.values() {
            if nodes.len() < 2 {
                continue;
            }
            for &start in nodes
                .iter()
                .filter(|&&n| self.invocation[n].is_some())
                .take(CYCLE_STARTS_MAX)
            {
                if let Some(cycle) = self.cycle_through(start, &comp) {
                    if best.as_ref().is_none_or(|b| cycle.len() < b.len()) {
                        best = Some(cycle);
                    }
                }
            }
        }
        best.map(|path| self.compress(&path))
    }

    /// Shortest cycle through `start` inside its component (BFS), as node hops.
    fn cycle_through(&self, start: usize, comp: &[usize]) -> Option<Vec<(usize, usize, Option<Edge>)>> {
        let mut parent: Vec<Option<(usize, usize)>> = vec![None; self.adj.len()];
        let mut queue = VecDeque::from([start]);
        while let Some(u) = queue.pop_front() {
            for (j, (v, _)) in self.adj[u].iter().enumerate() {
                let v = *v;
                if comp[v] != comp[start] {
                    continue;
                }
                if v == start {
                    let mut hops = vec![(u, j)];
                    let mut at = u;
                    while at != start {
                        let (p, pj) = parent[at]?;
                        hops.push((p, pj));
                        at = p;
                    }
                    hops.reverse();
                    return Some(
                        hops.into_iter()
                            .map(|(from, j)| (from, self.adj[from][j].0, self.adj[from][j].1.clone()))
                            .collect(),
                    );
                }
                if parent[v].is_none() && v != start {
                    parent[v] = Some((u, j));
                    queue.push_back(v);
                }
            }
        }
        None
    }

    /// Node hops to invocation edges: a run through barriers is one real-time edge.
    fn compress(&self, hops: &[(usize, usize, Option<Edge>)]) -> Vec<Edge> {
        let mut out = Vec::new();
        let mut rt_from: Option<usize> = None;
        for (from, to, edge) in hops {
            match edge {
                Some(e) => out.push(e.clone()),
                None => {
                    if let Some(i) = self.invocation[*from] {
                        rt_from = Some(i);
                    }
                    if let (Some(j), Some(i)) = (self.invocation[*to], rt_from) {
                        out.push(Edge {
                            from: i,
                            to: j,
                            kind: Kind::Rt,
                        });
                        rt_from = None;
                    }
                }
            }
        }
        out
    }

    /// Strongly connected components (iterative Tarjan): node → component id.
    fn components(&self) -> Vec<usize> {
        let n = self.adj.len();
        let (mut index, mut low, mut on_stack) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
        let mut comp = vec![usize::MAX; n];
        let (mut next_index, mut next_comp) = (0, 0);
        let mut stack = Vec::new();
        for root in 0..n {
            if index[root] != usize::MAX {
                continue;
            }
            let mut work = vec![(root, 0usize)];
            index[root] = next_index;
            low[root] = next_index;
            next_index += 1;
            stack.push(root);
            on_stack[root] = true;
            while let Some(&mut (u, ref mut j)) = work.last_mut() {
                if *j < self.adj[u].len() {
                    let v = self.adj[u][*j].0;
                    *j += 1;
                    if index[v] == usize::MAX {
                        index[v] = next_index;
                        low[v] = next_index;
                        next_index += 1;
                        stack.push(v);
                        on_stack[v] = true;
                        work.push((v, 0));
                    } else if on_stack[v] {
                        low[u] = low[u].min(index[v]);
                    }
                    continue;
                }
                work.pop();
                if let Some(&(p, _)) = work.last() {
                    low[p] = low[p].min(low[u]);
                }
                if low[u] == index[u] {
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        comp[w] = next_comp;
                        if w == u {
                            break;
                        }
                    }
                    next_comp += 1;
                }
            }
        }
        comp
    }
}
