//! `ferry cluster status`, `ferry cluster assign-slots` and `ferry cluster reshard`:
//! reading and changing the configuration the config group holds.

use std::time::{Duration, Instant};

use ferry_config::{Command, Outcome};

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
        for member in client.members() {
            match client.status(member).await {
                Ok(status) => println!(
                    "member {} at {member}: leader {}, term {}, applied {}, epoch {}",
                    status.id,
                    status.leader.map_or("none".to_string(), |id| id.to_string()),
                    status.term,
                    status
                        .last_applied
                        .map_or("none".to_string(), |index| index.to_string()),
                    status.epoch
                ),
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
        }
        Ok(())
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
        let command = Command::AssignSlots {
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
            let abort = Command::AbortMove {
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
        let begin = Command::BeginMove {
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
                        .propose(Command::AbortMove {
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
