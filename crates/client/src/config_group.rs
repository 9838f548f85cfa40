//! Talking to the config group (`ferry config` members) from outside it: storage nodes,
//! gateways, clients and admin commands. Any member answers a watch; a proposal or a
//! heartbeat goes to the leader, found by following the members' `NotLeader` hints. The
//! frames are read and written by `ferry_net::config_frame`, as the members do.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_cluster::ClusterMap;
use ferry_config::lease::{Grant, Heartbeat};
use ferry_config::wire::{decode, encode, Channel, ClientReply, ClientRequest, GroupStatus};
use ferry_config::{ClusterConfig, ConfigChange, Outcome};
use ferry_net::config_frame::{read_frame, write_frame};
use tokio::sync::watch;

/// Longest a connection to a member may take to open.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// Longest a request other than a watch waits for its answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest a proposal keeps looking for a leader (an election takes about a second).
pub const PROPOSE_DEADLINE: Duration = Duration::from_secs(10);

/// Pause between rounds over the members while no leader is known.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// How long one watch waits for a newer configuration before asking again.
pub const WATCH_WAIT: Duration = Duration::from_secs(10);

/// Why the group could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum ConfigGroupError {
    /// No member could be reached, or none answered in time.
    #[error("no config member answered ({0})")]
    Unreachable(String),
    /// No leader was found before the deadline.
    #[error("the config group has no leader (tried for {0:?})")]
    NoLeader(Duration),
    /// The cluster has no configuration yet.
    #[error("the cluster has no configuration yet (waited {0:?}): start the config members with --cluster-map")]
    NotBootstrapped(Duration),
    /// The group could not be followed from this process (its member list, its TLS
    /// files, the watch's thread).
    #[error("{0}")]
    Start(String),
    /// A member could not serve the request.
    #[error("config member {member}: {why}")]
    Failed {
        /// The member's address.
        member: String,
        /// What it said.
        why: String,
    },
}

/// A handle on the config group, given its members' addresses.
#[derive(Clone, Debug)]
pub struct ConfigClient {
    members: Vec<String>,
    /// The member that last answered as leader: asked first next time.
    leader: Arc<parking_lot::Mutex<Option<String>>>,
    /// TLS for every connection to a member; `None`: plain TCP.
    tls: Option<Arc<rustls::ClientConfig>>,
}

async fn ask(
    addr: &str,
    tls: Option<&Arc<rustls::ClientConfig>>,
    request: &ClientRequest,
    within: Duration,
) -> std::io::Result<ClientReply> {
    let exchange = async {
        let mut stream = ferry_net::tls::dial(addr, tls, CONNECT_TIMEOUT).await?;
        write_frame(&mut stream, &encode(Channel::Client, request)).await?;
        match read_frame(&mut stream).await? {
            Some((Channel::Client, body)) => {
                decode(&body).map_err(|err| std::io::Error::new(std::io::ErrorKind::InvalidData, err))
            }
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the member closed the connection",
            )),
        }
    };
    tokio::time::timeout(within, exchange)
        .await
        .unwrap_or_else(|_| Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in time")))
}

impl ConfigClient {
    /// A client of the group whose members listen at `members` (`host:port` each).
    pub fn new(members: Vec<String>) -> ConfigClient {
        ConfigClient {
            members,
            leader: Arc::default(),
            tls: None,
        }
    }

    /// The same client, speaking TLS to the members (they must serve it).
    pub fn with_tls(mut self, tls: Arc<rustls::ClientConfig>) -> ConfigClient {
        self.tls = Some(tls);
        self
    }

    /// The members' addresses.
    pub fn members(&self) -> &[String] {
        &self.members
    }

    /// Asks the members in turn until one answers.
    async fn ask_any(
        &self,
        request: &ClientRequest,
        within: Duration,
    ) -> Result<(String, ClientReply), ConfigGroupError> {
        let mut errors = Vec::new();
        for addr in &self.members {
            match ask(addr, self.tls.as_ref(), request, within).await {
                Ok(reply) => return Ok((addr.clone(), reply)),
                Err(err) => errors.push(format!("{addr}: {err}")),
            }
        }
        Err(ConfigGroupError::Unreachable(errors.join("; ")))
    }

    /// The member listed after `member` (the first after the last).
    fn member_after(&self, member: &str) -> Option<String> {
        let at = self.members.iter().position(|m| m == member)?;
        Some(self.members[(at + 1) % self.members.len()].clone())
    }

    /// A committed configuration newer than `known_epoch`, or after `wait` the newest the
    /// answering member has.
    pub async fn watch(&self, known_epoch: u64, wait: Duration) -> Result<ClusterConfig, ConfigGroupError> {
        let request = ClientRequest::Watch {
            known_epoch,
            wait_ms: wait.as_millis() as u64,
        };
        match self.ask_any(&request, wait + REQUEST_TIMEOUT).await? {
            (_, ClientReply::Config(config)) => Ok(config),
            (member, other) => Err(ConfigGroupError::Failed {
                member,
                why: format!("answered a watch with {other:?}"),
            }),
        }
    }

    /// The configuration a member has now.
    pub async fn current(&self) -> Result<ClusterConfig, ConfigGroupError> {
        self.watch(u64::MAX, Duration::ZERO).await
    }

    /// One member's view of the group.
    pub async fn status(&self, member: &str) -> Result<GroupStatus, ConfigGroupError> {
        match ask(member, self.tls.as_ref(), &ClientRequest::Status, REQUEST_TIMEOUT).await {
            Ok(ClientReply::Status(status)) => Ok(status),
            Ok(other) => Err(ConfigGroupError::Failed {
                member: member.to_string(),
                why: format!("answered a status request with {other:?}"),
            }),
            Err(err) => Err(ConfigGroupError::Unreachable(format!("{member}: {err}"))),
        }
    }

    /// Has the leader decide `command`, and returns its outcome once committed.
    pub async fn propose(&self, command: ConfigChange) -> Result<Outcome, ConfigGroupError> {
        match self
            .ask_leader(ClientRequest::Propose(command), PROPOSE_DEADLINE)
            .await?
        {
            (_, ClientReply::Outcome(outcome)) => Ok(outcome),
            (member, other) => Err(ConfigGroupError::Failed {
                member,
                why: format!("answered a proposal with {other:?}"),
            }),
        }
    }

    /// Reports to the leader and returns its grant (within `deadline`: a heartbeat late
    /// by more than a lease is worth nothing).
    pub async fn heartbeat(&self, heartbeat: Heartbeat, deadline: Duration) -> Result<Grant, ConfigGroupError> {
        match self.ask_leader(ClientRequest::Heartbeat(heartbeat), deadline).await? {
            (_, ClientReply::Grant(grant)) => Ok(grant),
            (member, other) => Err(ConfigGroupError::Failed {
                member,
                why: format!("answered a heartbeat with {other:?}"),
            }),
        }
    }

    /// Has the leader ask the process `incarnation` of storage node `node` to stop, so
    /// whoever runs it starts it again.
    pub async fn request_restart(&self, node: &str, incarnation: u64) -> Result<(), ConfigGroupError> {
        let request = ClientRequest::Restart {
            node: node.to_string(),
            incarnation,
        };
        match self.ask_leader(request, PROPOSE_DEADLINE).await? {
            (_, ClientReply::Accepted) => Ok(()),
            (member, other) => Err(ConfigGroupError::Failed {
                member,
                why: format!("answered a restart request with {other:?}"),
            }),
        }
    }

    /// Sends `request` to the leader, following the members' hints, until one answers
    /// other than `NotLeader` or `Failed`, or `deadline` passes.
    async fn ask_leader(
        &self,
        request: ClientRequest,
        deadline: Duration,
    ) -> Result<(String, ClientReply), ConfigGroupError> {
        let started = Instant::now();
        let mut next = self.leader.lock().clone();
        loop {
            let left = deadline.saturating_sub(started.elapsed()).min(REQUEST_TIMEOUT);
            let answer = match next.take() {
                Some(leader) => ask(&leader, self.tls.as_ref(), &request, left)
                    .await
                    .map(|reply| (leader.clone(), reply))
                    .map_err(|err| ConfigGroupError::Unreachable(format!("{leader}: {err}"))),
                None => self.ask_any(&request, left).await,
            };
            match answer {
                Ok((member, ClientReply::NotLeader { leader })) => {
                    next = match leader {
                        // A hint is followed only to an address this client was given: a
                        // member's own address may be unreachable from here (NAT), or
                        // bypass the path chosen (a proxy). Otherwise the next member is
                        // asked.
                        Some(hint) if self.members.contains(&hint) => Some(hint),
                        Some(_) => self.member_after(&member),
                        None => None,
                    }
                }
                Ok((member, ClientReply::Failed(why))) => tracing::debug!("config member {member}: {why}"),
                Ok((member, reply)) => {
                    *self.leader.lock() = Some(member.clone());
                    return Ok((member, reply));
                }
                Err(err) => tracing::debug!("config request: {err}"),
            }
            if started.elapsed() >= deadline {
                return Err(ConfigGroupError::NoLeader(deadline));
            }
            if next.is_none() {
                tokio::time::sleep(RETRY_PAUSE.min(deadline.saturating_sub(started.elapsed()))).await;
            }
        }
    }

    /// Follows the configuration: a channel that holds the newest committed configuration
    /// seen (the default, epoch 0, until one is), kept up to date by a task that watches the
    /// group until every receiver is gone. Epochs only rise on it.
    pub fn follow(&self) -> watch::Receiver<Arc<ClusterConfig>> {
        let (sender, receiver) = watch::channel(Arc::new(ClusterConfig::default()));
        let client = self.clone();
        tokio::spawn(async move {
            let mut known = 0;
            loop {
                let watched = tokio::select! {
                    watched = client.watch(known, WATCH_WAIT) => watched,
                    _ = sender.closed() => return,
                };
                match watched {
                    Ok(config) if config.epoch > known => {
                        known = config.epoch;
                        if sender.send(Arc::new(config)).is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(err) => {
                        tracing::debug!("following the config group: {err}");
                        tokio::time::sleep(RETRY_PAUSE).await;
                    }
                }
            }
        });
        receiver
    }
}

/// Follows the routing map the configuration gives (which node serves which slots, at
/// which epoch): waits at most `timeout` for the cluster's first configuration, then keeps
/// the channel at the map of each newer epoch. A configuration whose map does not check
/// out is skipped (and logged): a router keeps the last good map.
pub async fn follow_routes(
    mut configs: watch::Receiver<Arc<ClusterConfig>>,
    timeout: Duration,
) -> Result<watch::Receiver<Arc<ClusterMap>>, ConfigGroupError> {
    let usable = |config: &ClusterConfig| config.routing_map().ok().filter(|_| config.is_bootstrapped());
    let first = tokio::time::timeout(timeout, async {
        loop {
            if let Some(map) = usable(&configs.borrow_and_update()) {
                return Some(map);
            }
            configs.changed().await.ok()?;
        }
    })
    .await
    .ok()
    .flatten()
    .ok_or(ConfigGroupError::NotBootstrapped(timeout))?;
    let (sender, receiver) = watch::channel(Arc::new(first));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                changed = configs.changed() => if changed.is_err() { return },
                _ = sender.closed() => return,
            }
            let config = configs.borrow_and_update().clone();
            match config.routing_map() {
                Ok(map) if map.epoch() > sender.borrow().epoch() => {
                    if sender.send(Arc::new(map)).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(err) => tracing::error!("configuration at epoch {} skipped: {err}", config.epoch),
            }
        }
    });
    Ok(receiver)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake member: answers every client request with `reply`, and counts them.
    async fn member(reply: ClientReply) -> (String, Arc<std::sync::atomic::AtomicU64>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let asked = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = Arc::clone(&asked);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let reply = reply.clone();
                let counted = Arc::clone(&counted);
                tokio::spawn(async move {
                    while let Ok(Some(_)) = read_frame(&mut stream).await {
                        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if write_frame(&mut stream, &encode(Channel::Client, &reply))
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        (addr, asked)
    }

    #[tokio::test]
    async fn a_hint_naming_an_address_not_given_is_not_followed() {
        // The follower points at the leader's own address, which this client was not
        // given (it reaches the members through other addresses): it asks the next
        // member it was given instead, and the leader answers there.
        let unreachable = "10.255.255.1:7800".to_string();
        let (follower, _) = member(ClientReply::NotLeader {
            leader: Some(unreachable),
        })
        .await;
        let outcome = Outcome::Applied { epoch: 7 };
        let (leader, asked) = member(ClientReply::Outcome(outcome.clone())).await;
        let client = ConfigClient::new(vec![follower.clone(), leader]);
        let started = Instant::now();
        let answered = client
            .propose(ConfigChange::Leased {
                shard: 1,
                primary_epoch: 1,
            })
            .await
            .unwrap();
        assert_eq!(answered, outcome);
        assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 1);
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());

        // A hint to an address it was given is followed.
        let (leader_too, asked_too) = member(ClientReply::Outcome(outcome.clone())).await;
        let (pointing, _) = member(ClientReply::NotLeader {
            leader: Some(leader_too.clone()),
        })
        .await;
        let client = ConfigClient::new(vec![pointing, follower, leader_too]);
        assert_eq!(
            client
                .propose(ConfigChange::Leased {
                    shard: 1,
                    primary_epoch: 1
                })
                .await
                .unwrap(),
            outcome
        );
        assert_eq!(asked_too.load(std::sync::atomic::Ordering::Relaxed), 1);
    }
}
