//! `ferry cluster status` and `ferry cluster assign-slots`: reading and changing the
//! configuration the config group holds.

use std::time::Duration;

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

/// Gives a slot range to a shard: routing only, no key moves.
pub fn assign_slots(args: AssignArgs) -> CmdResult {
    let (first, last) = match args.slots.split_once('-') {
        Some((first, last)) => (first.trim().parse::<u16>(), last.trim().parse::<u16>()),
        None => (args.slots.trim().parse::<u16>(), args.slots.trim().parse::<u16>()),
    };
    let (Ok(first), Ok(last)) = (first, last) else {
        return Err(format!("--slots {:?}: expected N or N-M", args.slots).into());
    };
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
