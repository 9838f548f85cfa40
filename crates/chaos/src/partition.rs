//! A storage node's link to the config group, through proxies that can cut it: one
//! loopback proxy per member, all cut and healed together. While cut, every connection
//! through them is closed and new ones are closed on accept, so the node can neither
//! renew its lease nor learn a configuration, while its clients still reach it: the
//! partition the lease fence exists for.
//!
//! The proxies listen before `cluster up` starts (it is told their addresses) and learn
//! the members' addresses once it has bound them; until then they close every connection
//! too, and the node retries.

use std::net::SocketAddr;

use crate::link::{Flow, Link};

/// One node's proxied link to every member of the config group.
pub struct GroupLink {
    links: Vec<Link>,
    addrs: Vec<SocketAddr>,
}

impl GroupLink {
    /// `members` proxies on loopback, not yet forwarding anywhere.
    pub async fn start(members: usize) -> std::io::Result<GroupLink> {
        let mut links = Vec::new();
        for _ in 0..members {
            links.push(Link::start().await?);
        }
        let addrs = links.iter().map(Link::addr).collect();
        Ok(GroupLink { links, addrs })
    }

    /// Where the node dials the group (one address per member, in member order).
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The members' real addresses, in the same order.
    pub fn set_upstreams(&self, members: Vec<SocketAddr>) {
        for (link, member) in self.links.iter().zip(members) {
            link.set_upstream(member);
        }
    }

    /// Cuts the link: open connections close, new ones are closed on accept.
    pub fn cut(&self) {
        self.links.iter().for_each(|link| link.set(Flow::Cut));
    }

    /// Heals it.
    pub fn heal(&self) {
        self.links.iter().for_each(|link| link.set(Flow::Open));
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;
    use crate::link::tests::echo;

    /// Whether a connection through `addr` echoes a byte.
    async fn echoes(addr: SocketAddr) -> bool {
        let Ok(mut stream) = TcpStream::connect(addr).await else {
            return false;
        };
        if stream.write_all(b"x").await.is_err() {
            return false;
        }
        let mut byte = [0u8; 1];
        matches!(
            tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut byte)).await,
            Ok(Ok(1))
        )
    }

    #[tokio::test]
    async fn a_link_forwards_only_once_it_knows_where_and_while_it_is_not_cut() {
        let (first, second) = (echo().await, echo().await);
        let link = GroupLink::start(2).await.unwrap();
        let proxies = link.addrs().to_vec();
        assert!(!echoes(proxies[0]).await, "no upstream yet: closed");
        link.set_upstreams(vec![first, second]);
        assert!(echoes(proxies[0]).await && echoes(proxies[1]).await);

        // A connection open across the cut is closed by it.
        let mut open = TcpStream::connect(proxies[1]).await.unwrap();
        open.write_all(b"y").await.unwrap();
        let mut byte = [0u8; 1];
        assert_eq!(open.read(&mut byte).await.unwrap(), 1);
        link.cut();
        let after_cut = tokio::time::timeout(std::time::Duration::from_secs(5), open.read(&mut byte)).await;
        assert!(matches!(after_cut, Ok(Ok(0)) | Ok(Err(_))), "{after_cut:?}");
        assert!(!echoes(proxies[0]).await && !echoes(proxies[1]).await);

        link.heal();
        assert!(echoes(proxies[0]).await && echoes(proxies[1]).await);
    }
}
