//! `ferry cluster status`, `add-node`, `assign-slots` and `reshard`: reading and
//! changing the configuration the config group holds.

use std::time::{Duration, Instant};

use ferry_config::{ConfigChange, Outcome};

use crate::CmdResult;

/// Flags of `ferry cluster status`.
#[derive(clap::Args)]
pub struct StatusArgs {
    /// The config group's members, as HOST:PORT separated by commas.
    #[arg(long)]
    config_group: String,
    /// Print the configuration as JSON instead.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    tls: crate::tls_args::DialTlsArgs,
}

/// Flags of `ferry cluster add-node`.
#[derive(clap::Args)]
pub struct AddNodeArgs {
    /// The config group's members, as HOST:PORT separated by commas.
    #[arg(long)]
    config_group: String,
    /// The node's id (its `ferry server --node-id`).
    #[arg(long)]
    id: String,
    /// Where clients reach its ferry protocol listener (HOST:PORT).
    #[arg(long)]
    addr: String,
    /// Where Redis clients reach it (HOST:PORT): what `-MOVED` and CLUSTER SLOTS name.
    #[arg(long)]
    resp: Option<String>,
    /// Where its replicas (and slot moves) pull its log (HOST:PORT): its
    /// `--replication-listen`.
    #[arg(long)]
    replication: Option<String>,
    /// Add it as a replica of the shard this primary leads; without it, as the primary of
    /// a new shard with no slots (give it some with `reshard`).
    #[arg(long, value_name = "PRIMARY_ID")]
    replica_of: Option<String>,
    /// Give up if the configuration does not show the node within this many seconds.
    #[arg(long, default_value_t = 60)]
    timeout_secs: u64,
    #[command(flatten)]
    tls: crate::tls_args::DialTlsArgs,
}

/// Flags of `ferry cluster assign-slots`.
#[derive(clap::Args)]
pub struct AssignArgs {
    /// The config group's members, as HOST:PORT separated by commas.
    #[arg(long)]
    config_group: String,
    /// The slots, as N or N-M (inclusive).
    #[arg(long)]
    slots: String,
    /// The primary whose shard gets them.
    #[arg(long)]
    to: String,
    #[command(flatten)]
    tls: crate::tls_args::DialTlsArgs,
}

/// Flags of `ferry cluster reshard`.
#[derive(clap::Args)]
pub struct ReshardArgs {
    /// The config group's members, as HOST:PORT separated by commas.
    #[arg(long)]
    config_group: String,
    /// The slots, as N or N-M (inclusive), all served by one shard now.
    #[arg(long, required_unless_present = "abort")]
    slots: Option<String>,
    /// The primary whose shard gets them.
    #[arg(long, required_unless_present = "abort")]
    to: Option<String>,
    /// Give up the move under way instead (its source keeps the slots).
    #[arg(long, conflicts_with_all = ["slots", "to"])]
    abort: bool,
    /// Give the move up if it has not finished after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
    #[command(flatten)]
    tls: crate::tls_args::DialTlsArgs,
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

/// Prints each member's view of the group, then the configuration.
pub fn status(args: StatusArgs) -> CmdResult {
    let client = crate::config_cmd::group_client(&args.config_group, args.tls.client_tls()?.as_ref())?;
    runtime()?.block_on(async {
        let config = client.current().await?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&config)?);
            return Ok(());
        }
        // What the leader heard from each storage node: which are down, and why.
        let mut health = None;
        for member in client.members() {
            match client.status(member).await {
                Ok(status) if status.leader == Some(status.id) && health.is_none() => {
                    health = Some(status.nodes.clone());
                    print_member(member, &status);
                }
                Ok(status) => print_member(member, &status),
                Err(err) => println!("member at {member}: {err}"),
            }
        }
        println!("epoch {}", config.epoch);
        if let Some(moving) = &config.moving {
            println!(
                "moving slots {}-{} from shard {} to shard {} (since epoch {})",
                moving.first, moving.last, moving.from, moving.to, moving.begun_at
            );
        }
        if let Some(why) = &config.last_move_failure {
            println!("last slot move given up: {why}");
        }
        for (id, shard) in &config.shards {
            let slots: Vec<String> = shard.slots.iter().map(|(lo, hi)| format!("{lo}-{hi}")).collect();
            let node = &config.nodes[&shard.primary];
            println!(
                "shard {id}: primary {} at {}{}, replicas [{}], slots [{}]{}",
                shard.primary,
                node.addr,
                node.resp
                    .as_ref()
                    .map_or(String::new(), |resp| format!(" (resp {resp})")),
                shard.replicas.join(", "),
                slots.join(", "),
                shard
                    .fenced_at
                    .map_or(String::new(), |epoch| format!(", fenced at epoch {epoch}"))
            );
            for node in shard.members() {
                println!("  node {node}: {}", node_health(health.as_ref(), node));
            }
        }
        Ok(())
    })
}

fn print_member(member: &str, status: &ferry_config::wire::GroupStatus) {
    println!(
        "member {} at {member}: leader {}, term {}, applied {}, epoch {}",
        status.id,
        status.leader.map_or("none".to_string(), |id| id.to_string()),
        status.term,
        status
            .last_applied
            .map_or("none".to_string(), |index| index.to_string()),
        status.epoch
    );
}

/// One storage node as the leader last heard it: `up (...)`, `down: why`, or unknown.
fn node_health(
    health: Option<&std::collections::BTreeMap<String, ferry_config::lease::NodeHealth>>,
    node: &str,
) -> String {
    let Some(health) = health else {
        return "unknown (no member leads)".into();
    };
    match health.get(node) {
        None => "down: not heard from since the leader was elected".into(),
        Some(seen) => match seen.down() {
            Some(why) => format!("down: {why}"),
            None => format!(
                "up{} (heard {} ms ago, epoch {}, log end {})",
                if seen.ready { ", ready" } else { ", not ready" },
                seen.heard_ms_ago,
                seen.epoch,
                seen.log_end
            ),
        },
    }
}

/// Adds a storage node to the configuration; done at once if it is in it already (so a
/// node's start script may run it every time).
pub fn add_node_cmd(args: AddNodeArgs) -> CmdResult {
    for (flag, addr) in [
        ("--addr", Some(&args.addr)),
        ("--resp", args.resp.as_ref()),
        ("--replication", args.replication.as_ref()),
    ] {
        if let Some(addr) = addr {
            if !ferry_cluster::map::is_host_port(addr) {
                return Err(format!("{flag} {addr:?} is not HOST:PORT").into());
            }
        }
    }
    let following = crate::config_cmd::follow(&args.config_group, args.tls.client_tls()?.as_ref())?;
    let node = ferry_config::StorageNode {
        addr: args.addr.clone(),
        resp: args.resp.clone(),
        replication: args.replication.clone(),
    };
    let wait = Duration::from_secs(args.timeout_secs);
    add_node(&following, &args.id, node, args.replica_of.as_deref(), wait)?;
    let config = following.configs().borrow().clone();
    match config.shard_of(&args.id) {
        Some((shard, found)) if found.primary == args.id => {
            println!("{} is the primary of shard {shard} (epoch {})", args.id, config.epoch)
        }
        Some((shard, found)) => println!(
            "{} is a replica in shard {shard}, led by {} (epoch {})",
            args.id, found.primary, config.epoch
        ),
        None => return Err(format!("{} is not in the configuration", args.id).into()),
    }
    Ok(())
}

/// Adds storage node `id` to the configuration (as a replica of `replica_of`'s shard, or
/// as the primary of a new shard), unless it is in it already, and waits until the
/// configuration `following` holds shows it.
pub(crate) fn add_node(
    following: &ferry_client::following::Following,
    id: &str,
    node: ferry_config::StorageNode,
    replica_of: Option<&str>,
    wait: Duration,
) -> CmdResult {
    let client = following.client();
    let mut configs = following.configs();
    runtime()?.block_on(async {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let config = configs.borrow_and_update().clone();
            if config.shard_of(id).is_some() {
                return Ok(());
            }
            let command = match replica_of {
                Some(primary) => ConfigChange::AddReplica {
                    id: id.to_string(),
                    node: node.clone(),
                    primary: primary.to_string(),
                    expected_epoch: config.epoch,
                },
                None => ConfigChange::AddNode {
                    id: id.to_string(),
                    node: node.clone(),
                    expected_epoch: config.epoch,
                },
            };
            match client.propose(command).await {
                Ok(Outcome::Applied { .. }) => {}
                // A refusal that will not change (an unknown primary, an id taken) is the
                // answer; a stale epoch, or a group not bootstrapped yet, is tried again
                // at the next configuration.
                Ok(Outcome::Refused(ferry_config::Refusal::Invalid(why))) => {
                    return Err(format!("adding {id}: {why}").into());
                }
                Ok(Outcome::Refused(why)) => tracing::debug!("adding {id}: {why}"),
                Err(err) => tracing::debug!("adding {id}: {err}"),
            }
            if tokio::time::timeout_at(deadline, configs.changed()).await.is_err() {
                return Err(format!("{id} was not added to the configuration within {wait:?}").into());
            }
        }
    })
}

/// `N` or `N-M` as an inclusive slot range.
fn parse_slots(slots: &str) -> Result<(u16, u16), String> {
    let (first, last) = match slots.split_once('-') {
        Some((first, last)) => (first.trim().parse::<u16>(), last.trim().parse::<u16>()),
        None => (slots.trim().parse::<u16>(), slots.trim().parse::<u16>()),
    };
    match (first, last) {
        (Ok(first), Ok(last)) => Ok((first, last)),
        _ => Err(format!("--slots {slots:?}: expected N or N-M")),
    }
}

/// Gives a slot range to a shard: routing only, no key moves.
pub fn assign_slots(args: AssignArgs) -> CmdResult {
    let (first, last) = parse_slots(&args.slots)?;
    let client = crate::config_cmd::group_client(&args.config_group, args.tls.client_tls()?.as_ref())?;
    runtime()?.block_on(async {
        let config = client.watch(u64::MAX, Duration::ZERO).await?;
        let command = ConfigChange::AssignSlots {
            first,
            last,
            to: args.to.clone(),
            expected_epoch: config.epoch,
        };
        match client.propose(command).await? {
            Outcome::Applied { epoch } => {
                println!("epoch {epoch}: slots {first}-{last} are served by {}", args.to);
                Ok(())
            }
            Outcome::Refused(refusal) => Err(format!("refused: {refusal}").into()),
        }
    })
}

/// Moves a slot range and its keys to another shard online, and waits until the move is
/// done or given up: the destination copies the range, the source stops writes to it for
/// the hand-over, and the new epoch routes it to the destination.
pub fn reshard(args: ReshardArgs) -> CmdResult {
    let client = crate::config_cmd::group_client(&args.config_group, args.tls.client_tls()?.as_ref())?;
    runtime()?.block_on(async {
        let config = client.watch(u64::MAX, Duration::ZERO).await?;
        if args.abort {
            let Some(moving) = &config.moving else {
                println!("no slot move is under way");
                return Ok(());
            };
            let abort = ConfigChange::AbortMove {
                begun_at: moving.begun_at,
                why: "given up with `ferry cluster reshard --abort`".into(),
            };
            let outcome = client.propose(abort).await?;
            println!(
                "{outcome:?}: slots {}-{} stay where they were",
                moving.first, moving.last
            );
            return Ok(());
        }
        let (slots, to) = (args.slots.unwrap_or_default(), args.to.unwrap_or_default());
        let (first, last) = parse_slots(&slots)?;
        let begin = ConfigChange::BeginMove {
            first,
            last,
            to: to.clone(),
            expected_epoch: config.epoch,
        };
        let started = Instant::now();
        let begun_at = match client.propose(begin).await? {
            Outcome::Applied { epoch } => epoch,
            Outcome::Refused(refusal) => return Err(format!("refused: {refusal}").into()),
        };
        println!("epoch {begun_at}: moving slots {first}-{last} to {to}");
        let deadline = started + Duration::from_secs(args.timeout_secs);
        let mut known = begun_at;
        loop {
            let config = client.watch(known, Duration::from_secs(1)).await?;
            known = config.epoch;
            if config.moving.as_ref().is_some_and(|moving| moving.begun_at == begun_at) {
                if Instant::now() >= deadline {
                    let why = format!("not done within --timeout-secs {}", args.timeout_secs);
                    client
                        .propose(ConfigChange::AbortMove {
                            begun_at,
                            why: why.clone(),
                        })
                        .await?;
                    return Err(format!("slot move given up: {why}").into());
                }
                continue;
            }
            let moved = config
                .shard_led_by(&to)
                .is_some_and(|(id, _)| config.serving_shard(first, last) == Some(id));
            if moved {
                println!(
                    "epoch {}: slots {first}-{last} are served by {to} ({:.2} s)",
                    config.epoch,
                    started.elapsed().as_secs_f64()
                );
                return Ok(());
            }
            let why = config.last_move_failure.unwrap_or_else(|| "no reason recorded".into());
            return Err(format!("slot move given up: {why}").into());
        }
    })
}
