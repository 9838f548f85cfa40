//! One node of a sharded cluster: requests for keys another node serves are refused with
//! `moved` (naming the owner), and requests whose keys live on several nodes with
//! `cross_slot`, as Redis Cluster does. A commit is applied by one node, so refusing a
//! cross-node commit before anything is applied is what keeps it all-or-nothing.
//!
//! Keys are routed by their key bytes alone (the table is not hashed), so one key's rows in
//! different tables live together, and `{tag}` keys group related objects.

use std::sync::Arc;

use ferry_cluster::{key_slot, ClusterMap};
use ferry_proto::{Request, Response, Status};
use tokio::sync::watch;

/// This node's place in a cluster: its id, and the map of the newest configuration it
/// knows (fixed when read from a file, followed when the config group holds it).
#[derive(Clone, Debug)]
pub struct ClusterRole {
    /// This node's id in the map.
    pub node_id: String,
    routes: watch::Receiver<Arc<ClusterMap>>,
    /// In a config group, with replication: what keeps this node's lease (it serves as a
    /// primary only while it holds one).
    pub(crate) membership: Option<Membership>,
    /// Slots this node stops serving while a slot move hands them over.
    pub(crate) frozen: Arc<crate::frozen::FrozenSlots>,
}

/// A node's link to the config group, and the lease its heartbeats earn.
#[derive(Clone, Debug)]
pub struct Membership {
    /// The config group.
    pub client: ferry_client::config_group::ConfigClient,
    /// Its configurations, newest first.
    pub configs: watch::Receiver<Arc<ferry_config::ClusterConfig>>,
    /// Until when this node may serve as a primary.
    pub lease: Arc<crate::membership::Lease>,
}

impl ClusterRole {
    /// A node of a cluster whose map never changes (`--cluster-map`).
    pub fn fixed(map: ClusterMap, node_id: String) -> ClusterRole {
        // The sender goes at once: the receiver keeps the one value.
        let (_, routes) = watch::channel(Arc::new(map));
        ClusterRole {
            node_id,
            routes,
            membership: None,
            frozen: Arc::default(),
        }
    }

    /// A node that follows the map of each new configuration (`--config-group`).
    pub fn following(routes: watch::Receiver<Arc<ClusterMap>>, node_id: String) -> ClusterRole {
        ClusterRole {
            node_id,
            routes,
            membership: None,
            frozen: Arc::default(),
        }
    }

    /// The same node, reporting to the config group and serving as a primary only under a
    /// lease (a node with replication: its shard can fail over).
    pub fn with_membership(
        mut self,
        client: ferry_client::config_group::ConfigClient,
        configs: watch::Receiver<Arc<ferry_config::ClusterConfig>>,
    ) -> ClusterRole {
        self.membership = Some(Membership {
            client,
            configs,
            lease: Arc::default(),
        });
        self
    }

    /// Whether this node must not serve its keys now: it needs a lease and holds none.
    pub(crate) fn lease_lapsed(&self) -> bool {
        self.membership
            .as_ref()
            .is_some_and(|membership| membership.lease.lapsed())
    }

    /// Whether this node is a replica, in the newest configuration, of the shard `primary`
    /// leads (so it holds a copy of that shard's keys).
    pub(crate) fn replicates(&self, primary: &str) -> bool {
        self.membership.as_ref().is_some_and(|membership| {
            let config = membership.configs.borrow();
            config
                .shard_led_by(primary)
                .is_some_and(|(_, shard)| shard.replicas.contains(&self.node_id))
        })
    }

    /// Whether this node is listed in the map it routes by (a replica is not).
    pub fn in_map(&self) -> bool {
        self.map().node(&self.node_id).is_some()
    }

    /// The map it routes by now.
    pub fn map(&self) -> Arc<ClusterMap> {
        self.routes.borrow().clone()
    }
}

impl PartialEq for ClusterRole {
    fn eq(&self, other: &ClusterRole) -> bool {
        self.node_id == other.node_id && self.map() == other.map()
    }
}

impl Eq for ClusterRole {}

/// `moved SLOT NODE_ID HOST:PORT` for `key`, if another node serves it.
fn moved(role: &ClusterRole, key: &[u8]) -> Option<String> {
    let map = role.map();
    let owner = map.owner(key);
    (owner.id != role.node_id).then(|| format!("moved {} {} {}", key_slot(key), owner.id, owner.addr))
}

/// Why this node may not touch `key` (`moved …`), or `None` if it serves it.
pub(crate) fn not_owned(role: &ClusterRole, key: &[u8]) -> Option<String> {
    moved(role, key).map(|why| format!("{why}: a function on a cluster node can only reach that node's keys"))
}

/// Why this node may not touch `key` for now (its slot is being handed over), if so.
pub(crate) fn frozen(role: &ClusterRole, key: &[u8]) -> Option<String> {
    role.frozen.refusal(key)
}

/// The refusal for a request this node must not serve, or `None` to serve it. An
/// invocation is refused when its routing key (`route`) lives elsewhere, before it runs;
/// one without a routing key runs here until it reaches another node's key.
pub(crate) fn misrouted(role: &ClusterRole, request: &Request, route: Option<&[u8]>) -> Option<Response> {
    if matches!(request, Request::List { .. }) {
        return Some(Response::error(Status::CrossSlot, ferry_proto::LISTING_NEEDS_ONE_NODE));
    }
    // The catalog's keys are every node's own: they route nowhere.
    let mut keys: Vec<&[u8]> = request
        .keys_with_tables()
        .into_iter()
        .filter(|(table, _)| !ferry_cluster::is_node_local(table))
        .map(|(_, key)| key)
        .collect();
    keys.extend(route);
    if let Err(spread) = role.map().single_owner(keys.iter().copied()) {
        return Some(Response::error(Status::CrossSlot, spread.to_string()));
    }
    if let Some(why) = moved(role, keys.first()?) {
        return Some(Response::error(Status::Moved, why));
    }
    if let Some(why) = keys.iter().find_map(|key| role.frozen.refusal(key)) {
        return Some(Response::error(Status::Unavailable, why));
    }
    role.lease_lapsed()
        .then(|| Response::error(Status::Unavailable, NO_LEASE.to_string()))
}

/// The refusal of a primary without a lease (Redis's TRYAGAIN: the client retries, and
/// finds the new primary once the configuration names it).
pub(crate) const NO_LEASE: &str =
    "TRYAGAIN this primary holds no lease from the config group (unreachable, or a failover is under way); retry";

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use ferry_proto::CommitWrite;

    fn role(node_id: &str) -> ClusterRole {
        let addrs = vec!["127.0.0.1:7701".to_string(), "127.0.0.1:7702".to_string()];
        ClusterRole::fixed(ClusterMap::even(&addrs).unwrap(), node_id.into())
    }

    fn put(key: &'static [u8]) -> Request {
        Request::Put {
            table: "t".into(),
            key: Bytes::from_static(key),
            value: Bytes::new(),
        }
    }

    #[test]
    fn owned_keys_pass_others_are_moved_and_mixed_ones_cross_slot() {
        // "hello" is slot 866 (s1: 0-8191), "foo" slot 12182 (s2).
        assert_eq!(misrouted(&role("s1"), &put(b"hello"), None), None);
        let moved = misrouted(&role("s1"), &put(b"foo"), None).unwrap();
        assert_eq!(moved.status, Status::Moved);
        assert_eq!(moved, Response::error(Status::Moved, "moved 12182 s2 127.0.0.1:7702"));
        let commit = Request::Commit {
            reads: Vec::new(),
            writes: [&b"hello"[..], b"foo"]
                .iter()
                .map(|k| CommitWrite {
                    table: "t".into(),
                    key: Bytes::copy_from_slice(k),
                    value: None,
                })
                .collect(),
        };
        for node in ["s1", "s2"] {
            assert_eq!(misrouted(&role(node), &commit, None).unwrap().status, Status::CrossSlot);
        }
        assert_eq!(misrouted(&role("s2"), &Request::Stats, None), None);
        // An invocation goes by its routing key: foo's owner runs it, hello's refuses it.
        let invoke = Request::Invoke {
            function: "f".into(),
            args: Bytes::new(),
            allow_pushback: false,
            trace: false,
            handoff: true,
            costs: false,
        };
        assert_eq!(misrouted(&role("s2"), &invoke, Some(b"foo")), None);
        assert_eq!(misrouted(&role("s2"), &invoke, None), None);
        let moved = misrouted(&role("s2"), &invoke, Some(b"hello")).unwrap();
        assert_eq!(moved.status, Status::Moved);
    }

    #[test]
    fn a_primary_without_a_lease_refuses_its_own_keys() {
        let (_, configs) = watch::channel(Arc::new(ferry_config::ClusterConfig::default()));
        let client = ferry_client::config_group::ConfigClient::new(vec!["127.0.0.1:1".into()]);
        let leased = role("s1").with_membership(client, configs);
        // Never granted (or lapsed): its own key is refused with TRYAGAIN, and another
        // node's key is still `moved`.
        let refused = misrouted(&leased, &put(b"hello"), None).unwrap();
        assert_eq!(refused.status, Status::Unavailable);
        assert_eq!(refused, Response::error(Status::Unavailable, NO_LEASE));
        assert_eq!(misrouted(&leased, &put(b"foo"), None).unwrap().status, Status::Moved);
        // Without replication there is no lease to hold.
        assert_eq!(misrouted(&role("s1"), &put(b"hello"), None), None);
    }
}
