//! `ferry cluster restart`: a rolling restart (or upgrade) of the storage nodes, one at a
//! time, with no acknowledged write lost. Replicas go first: each is asked to stop (the
//! config group's leader answers its next heartbeat with a restart request), and whoever
//! runs it (`cluster up`, Kubernetes, systemd) starts it again; the command waits until
//! the leader hears a new process of it that says it is ready. Then each primary hands its
//! shard over to its most caught-up ready replica (`ConfigChange::HandOver`: it stops serving,
//! the replica copies what is left and is promoted); the old primary, now a replica, stops
//! by itself, is started again, copies the new primary and is waited for the same way.
//! `ferry cluster hand-over` is the hand-over alone (a Kubernetes pod's preStop hook).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ferry_client::config_group::ConfigClient;
use ferry_config::lease::{NodeHealth, EXPIRY_MS};
use ferry_config::{ClusterConfig, ConfigChange, Outcome};

use crate::CmdResult;

/// How often the leader is asked how the node being restarted is doing.
const POLL: Duration = Duration::from_millis(100);

/// How long a restart request may go unanswered (no new process heard) before it is sent
/// again: the leader that took it may have lost its leadership, and the request with it.
const ASK_AGAIN: Duration = Duration::from_secs(3);

/// Flags of `ferry cluster restart`.
#[derive(clap::Args)]
pub struct RestartArgs {
    /// The config group's members, as HOST:PORT separated by commas.
    #[arg(long)]
    config_group: String,
    /// Restart only this storage node (a primary is handed over to a replica first).
    #[arg(long, value_name = "ID")]
    node: Option<String>,
    /// Give up if a node is not back and ready within this many seconds.
    #[arg(long, default_value_t = 120)]
    timeout_secs: u64,
    #[command(flatten)]
    tls: crate::tls_args::DialTlsArgs,
}

/// Restarts the nodes one at a time, printing each step.
pub fn restart(args: RestartArgs) -> CmdResult {
    let client = crate::config_cmd::group_client(&args.config_group, args.tls.client_tls()?.as_ref())?;
    let timeout = Duration::from_secs(args.timeout_secs);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let config = client.current().await?;
        let order = restart_order(&config, args.node.as_deref())?;
        let started = Instant::now();
        for node in &order {
            restart_one(&client, node, timeout).await?;
        }
        println!(
            "restarted {} storage node{} in {:.1} s",
            order.len(),
            if order.len() == 1 { "" } else { "s" },
            started.elapsed().as_secs_f64()
        );
        Ok(())
    })
}

/// The nodes to restart, in order: every replica, then every primary (or just `only`).
fn restart_order(config: &ClusterConfig, only: Option<&str>) -> Result<Vec<String>, String> {
    if let Some(node) = only {
        if config.shard_of(node).is_none() {
            return Err(format!(
                "{node:?} is not a storage node of the configuration (epoch {})",
                config.epoch
            ));
        }
        return Ok(vec![node.to_string()]);
    }
    let replicas = config.shards.values().flat_map(|shard| shard.replicas.iter().cloned());
    let primaries = config.shards.values().map(|shard| shard.primary.clone());
    Ok(replicas.chain(primaries).collect())
}

/// Flags of `ferry cluster hand-over`.
#[derive(clap::Args)]
pub struct HandOverArgs {
    /// The config group's members, as HOST:PORT separated by commas.
    #[arg(long)]
    config_group: String,
    /// The storage node: if it is a primary, its shard is handed over to its most
    /// caught-up ready replica; if not, there is nothing to do.
    #[arg(long, value_name = "ID")]
    node: String,
    /// Give up if the shard has no new primary within this many seconds.
    #[arg(long, default_value_t = 60)]
    timeout_secs: u64,
    #[command(flatten)]
    tls: crate::tls_args::DialTlsArgs,
}

/// Hands a primary's shard over to a replica (what a pod runs before it stops).
pub fn hand_over_cmd(args: HandOverArgs) -> CmdResult {
    let client = crate::config_cmd::group_client(&args.config_group, args.tls.client_tls()?.as_ref())?;
    let timeout = Duration::from_secs(args.timeout_secs);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let config = client.current().await?;
        match config.shard_of(&args.node) {
            None => Err(format!("{:?} is not a storage node of the configuration", args.node).into()),
            Some((_, shard)) if shard.primary != args.node || shard.replicas.is_empty() => {
                println!(
                    "node {}: not the primary of a shard with replicas: nothing to hand over",
                    args.node
                );
                Ok(())
            }
            Some(_) => hand_over(&client, &args.node, timeout).await.map(|_| ()),
        }
    })
}

/// Hands the shard `node` leads over to its most caught-up ready replica, and returns
/// that replica once the configuration shows it promoted.
async fn hand_over(
    client: &ConfigClient,
    node: &str,
    timeout: Duration,
) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let config = client.current().await?;
    let (shard_id, shard) = config
        .shard_led_by(node)
        .ok_or_else(|| format!("{node:?} leads no shard"))?;
    let health = leader_health(client).await?;
    let to = shard
        .replicas
        .iter()
        .filter_map(|replica| Some((replica, heard(&health, replica).ok().filter(|h| h.ready)?)))
        .max_by_key(|(_, health)| health.log_end)
        .map(|(replica, _)| replica.clone())
        .ok_or_else(|| format!("no replica of shard {shard_id} is ready to take over from {node}"))?;
    let command = ConfigChange::HandOver {
        shard: shard_id,
        primary_epoch: shard.primary_epoch,
        to: to.clone(),
    };
    match client.propose(command).await? {
        Outcome::Applied { .. } => {}
        Outcome::Refused(why) => return Err(format!("handing shard {shard_id} over to {to}: {why}").into()),
    }
    println!("node {node}: handing shard {shard_id} over to {to}");
    let started = Instant::now();
    let deadline = started + timeout;
    loop {
        let config = client.current().await;
        let primary = config
            .ok()
            .and_then(|config| Some(config.shards.get(&shard_id)?.primary.clone()));
        if primary.as_deref() == Some(to.as_str()) {
            break;
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "shard {shard_id} not handed over to {to} within {} s",
                timeout.as_secs()
            )
            .into());
        }
        tokio::time::sleep(POLL).await;
    }
    println!(
        "node {node}: shard {shard_id} handed over to {to} in {} ms",
        started.elapsed().as_millis()
    );
    Ok(to)
}

/// Restarts `node`: a primary with replicas after handing its shard over (it then stops
/// by itself, demoted), anything else by asking it to stop. Returns once a new process of
/// it is ready.
async fn restart_one(client: &ConfigClient, node: &str, timeout: Duration) -> CmdResult {
    let started = Instant::now();
    let config = client.current().await?;
    let (shard_id, shard) = config
        .shard_of(node)
        .ok_or_else(|| format!("{node:?} left the configuration"))?;
    let before = heard(&leader_health(client).await?, node)?.incarnation;
    let handed_over = shard.primary == node && !shard.replicas.is_empty();
    if handed_over {
        hand_over(client, node, timeout).await?;
        println!("node {node}: restarts as a replica");
    } else {
        if shard.primary == node {
            println!("node {node}: its shard {shard_id} has no replica: its keys are refused until it is back");
        }
        client.request_restart(node, before).await?;
        println!("node {node}: asked to restart");
    }
    let mut asked = Instant::now();
    let deadline = Instant::now() + timeout;
    loop {
        let health = leader_health(client).await.unwrap_or_default();
        let back = health.get(node).filter(|health| health.incarnation != before);
        if back.is_some_and(|health| health.ready && health.heard_ms_ago <= EXPIRY_MS) {
            break;
        }
        if Instant::now() >= deadline {
            let state = match back {
                Some(_) => "restarted, not ready",
                None => "not restarted",
            };
            return Err(format!(
                "node {node} not back and ready within {} s ({state})",
                timeout.as_secs()
            )
            .into());
        }
        // The leader that took the request may have lost its leadership, and it.
        if back.is_none() && !handed_over && asked.elapsed() >= ASK_AGAIN {
            client.request_restart(node, before).await?;
            asked = Instant::now();
        }
        tokio::time::sleep(POLL).await;
    }
    println!("node {node}: back and ready ({:.1} s)", started.elapsed().as_secs_f64());
    Ok(())
}

/// What `node` last told the leader, if it did lately.
fn heard<'a>(health: &'a BTreeMap<String, NodeHealth>, node: &str) -> Result<&'a NodeHealth, String> {
    match health.get(node) {
        Some(health) if health.down().is_none() => Ok(health),
        Some(health) => Err(format!(
            "node {node} is down ({}): not restarted",
            health.down().unwrap_or_default()
        )),
        None => Err(format!(
            "node {node} has not reported to the config group's leader: is it running?"
        )),
    }
}

/// What the config group's leader has heard from each storage node.
async fn leader_health(client: &ConfigClient) -> Result<BTreeMap<String, NodeHealth>, String> {
    for member in client.members() {
        if let Ok(status) = client.status(member).await {
            if status.leader == Some(status.id) {
                return Ok(status.nodes);
            }
        }
    }
    Err("no config member says it leads".into())
}
