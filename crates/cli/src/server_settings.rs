//! `ferry server`'s settings: one type, from which its flags, its `--help`, its config
//! file's keys and their errors all come. A key is its flag's name with `_` for `-`
//! (`--invoke-budget 50ms` is `invoke_budget = "50ms"`); a flag given wins over the file,
//! and `--tenant` adds to the file's `[[tenant]]` tables. docs/ARCHITECTURE.md's table of
//! them is checked against this type by a test.

use ferry_proto::TenantId;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use ferry_server::config::{parse_tenant_flag, TenantConfig};
use ferry_server::Ack;
use ferry_wal::FsyncMode;

use crate::flag_values::{choice, duration};

/// Settings a config file may not give: the file's own path, the listening sockets a
/// parent process hands over, and the soak's hidden switch.
pub const FLAG_ONLY: &[&str] = &["config", "listen_fd", "resp_fd", "replication_fd", "chaos_functions"];

/// Settings of `ferry server`. Flags override the config file.
#[derive(clap::Args, Serialize, Deserialize, Default, Debug, Clone)]
#[serde(default)]
pub struct ServerSettings {
    /// Address to listen on; port 0 picks a free port (printed on the first line).
    /// Default 127.0.0.1:7700.
    #[arg(long)]
    pub listen: Option<String>,
    /// Worker threads ("cores"), each with its own queue (default 1).
    #[arg(long)]
    pub cores: Option<usize>,
    /// TOML config file: any setting below by its flag's name with `_` for `-`
    /// (`invoke_budget = "50ms"`), tenants as `[[tenant]]` tables (id, token, quota_bytes,
    /// home_core, maxmemory_policy). Flags win over it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// A tenant as ID:TOKEN; repeatable. Added to those of the config file.
    #[arg(long = "tenant", value_name = "ID:TOKEN", value_parser = parse_tenant_flag)]
    #[serde(rename = "tenant")]
    pub tenants: Vec<TenantConfig>,
    /// Threads that accept connections (then handed to the cores) and serve the metrics,
    /// replication and config-group links.
    #[arg(long)]
    pub io_threads: Option<usize>,
    /// Also serve the soak's storage function (`ferry check --cluster` starts its
    /// cluster so).
    #[cfg(feature = "lab")]
    #[arg(long, hide = true)]
    pub chaos_functions: bool,
    /// Depth of each worker's queue before requests are refused with `overloaded`.
    #[arg(long)]
    pub queue_capacity: Option<usize>,
    /// CPU-time budget of one server-side invocation, a Lua call's time limit too (e.g.
    /// 100ms; 1ms to 60s).
    #[arg(long, value_parser = duration)]
    #[serde(with = "crate::flag_values::duration_text")]
    pub invoke_budget: Option<Duration>,
    #[command(flatten)]
    #[serde(flatten)]
    pub limits: crate::limits_args::ConnectionLimitArgs,
    /// Pin the whole node to these CPUs (e.g. 0 or 0-1).
    #[arg(long)]
    pub cpu_set: Option<String>,
    /// Keep the --cpu-set CPUs from idling: one idle-priority spinning thread per CPU, which
    /// runs only when the node does not (on VMs a halted vCPU takes milliseconds to wake).
    #[arg(long, requires = "cpu_set")]
    pub keep_warm: bool,
    /// Emulated-work calibration to use instead of measuring (iterations per ms).
    #[arg(long)]
    pub spin_iters_per_ms: Option<u64>,
    /// ASFP pushback: compute credit D per data access (e.g. 5us); an invocation that
    /// allows pushback is handed back when its compute so far exceeds accesses × D.
    #[arg(long, value_parser = duration)]
    #[serde(with = "crate::flag_values::duration_text")]
    pub pushback_credit: Option<Duration>,
    /// ASFP pushback: suspended invocations a worker must hold before pushing back.
    #[arg(long)]
    pub pushback_old_min: Option<usize>,
    /// ASFP pushback: invocations that must be waiting in the worker's queue.
    #[arg(long)]
    pub pushback_new_min: Option<usize>,
    /// ASFP pushback: invocations a worker keeps after pushing one back.
    #[arg(long)]
    pub pushback_keep_min: Option<usize>,
    /// Queue every request in its tenant's lane of its core, even when the core is idle
    /// (by default an idle core runs it at once, on the connection; for measurements).
    #[arg(long)]
    pub no_inline_data_ops: bool,
    /// Serve as one node of a sharded cluster: the cluster map (TOML: [[node]] id, addr,
    /// slots = ["0-8191", ...]); keys of other nodes' slots are refused with `moved`.
    #[arg(long, requires = "node_id", conflicts_with = "config_group")]
    pub cluster_map: Option<PathBuf>,
    /// Serve as one node of a cluster whose configuration the config group holds (`ferry
    /// config` members, as HOST:PORT separated by commas): the node waits for the first
    /// configuration, then follows each new epoch's map.
    #[arg(long, requires = "node_id")]
    pub config_group: Option<String>,
    /// Serve Prometheus metrics (`GET /metrics`) and the probes `GET /healthz` and
    /// `GET /readyz` on this address (port 0: any free one;
    /// printed as `metrics on HOST:PORT` after the `listening on` line).
    #[arg(long)]
    pub metrics: Option<String>,
    /// Speak RESP (redis-cli, redis-benchmark, Redis clients) on this address too (port 0:
    /// any free one; printed as `resp on HOST:PORT` right after the `listening on` line).
    #[arg(long)]
    pub resp: Option<String>,
    /// Sign RESP connections in as this tenant before any AUTH (Redis's `default` user
    /// with no password), for clients and test suites that send none; off by default.
    #[arg(long, value_name = "ID")]
    pub default_tenant: Option<TenantId>,
    /// Serve the ferry protocol on this inherited listening socket (a file descriptor)
    /// instead of binding --listen: how `ferry cluster up` hands each node the socket it
    /// bound for the cluster map.
    #[arg(long)]
    pub listen_fd: Option<i32>,
    /// Serve RESP on this inherited listening socket instead of binding --resp.
    #[arg(long)]
    pub resp_fd: Option<i32>,
    /// This node's id in --cluster-map or in the config group's configuration.
    #[arg(long)]
    pub node_id: Option<String>,
    /// Keep a write-ahead log of every commit in this directory (it must exist) and recover
    /// from it on start; without it the node keeps everything in memory only.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// When the log is synced to disk: `always` (before any reply that reveals a write:
    /// survives power loss), `everysec` (written before the reply, synced each second:
    /// survives kill -9, power loss may lose about a second) or `no` (written before the
    /// reply, synced by the OS: survives kill -9). Default everysec.
    #[arg(long, value_parser = choice::<FsyncMode>())]
    #[serde(with = "crate::flag_values::choice_name")]
    pub fsync: Option<FsyncMode>,
    /// Most bytes of log on disk; commits past it are refused (reads are still served).
    #[arg(long)]
    pub max_log_bytes: Option<u64>,
    /// Take a snapshot of every tenant, and remove the log it makes unneeded, each time
    /// the log grows by this many bytes (default 256 MiB; at most half of
    /// --max-log-bytes). BGSAVE and SAVE take one on demand.
    #[arg(long)]
    pub snapshot_log_bytes: Option<u64>,
    #[command(flatten)]
    #[serde(flatten)]
    pub tls: crate::tls_args::ServeTlsArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub replication: ReplicationSettings,
}

/// Log shipping between a primary and its replicas (both need --data-dir).
#[derive(clap::Args, Serialize, Deserialize, Default, Debug, Clone)]
#[serde(default)]
pub struct ReplicationSettings {
    /// Serve this node's log to replicas on this address (port 0: any free one; printed
    /// as `replication on HOST:PORT`). Over TLS when the node's listeners are.
    #[arg(long, value_name = "ADDR")]
    pub replication_listen: Option<String>,
    /// Serve replication on this inherited listening socket instead of binding
    /// --replication-listen (how `ferry cluster up` hands it over).
    #[arg(long, hide = true)]
    pub replication_fd: Option<i32>,
    /// Be a replica of the primary whose replication address this is: copy its snapshots
    /// and log when this data dir holds nothing yet, then every record it logs. The node
    /// serves reads and refuses writes (READONLY). Over TLS with --tls-ca. With
    /// --config-group the configuration says whom a node copies instead.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "config_group")]
    pub replica_of: Option<String>,
    /// The secret every replication link of the cluster presents (1-1024 bytes); needed
    /// with --replication-listen and --replica-of.
    #[arg(long, value_name = "TOKEN")]
    pub replication_token: Option<String>,
    /// When a write is acknowledged: `primary` (once this node's log holds it as --fsync
    /// promises; the default) or `replica` (once a replica's log holds it too; with no
    /// replica following, replies that may reveal a write wait).
    #[arg(long, value_parser = choice::<Ack>())]
    #[serde(with = "crate::flag_values::choice_name")]
    pub ack: Option<Ack>,
    /// Dial the primary (--replica-of) and the config group (--config-group) over TLS,
    /// trusting only these CAs (PEM); --tls-cert and --tls-key are presented when asked
    /// for a client certificate.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
}

/// The settings of the command line over those of its `--config` file.
pub fn layered(flags: &ServerSettings) -> Result<ServerSettings, String> {
    crate::settings_file::layered(flags, flags.config.as_deref(), FLAG_ONLY)
}

/// The table of docs/ARCHITECTURE.md: each flag, its config key, and its help, from the
/// one definition above.
#[cfg(test)]
fn settings_table() -> String {
    use clap::Args;
    let command = ServerSettings::augment_args(clap::Command::new("server"));
    let mut table = String::from("| Flag | Config file key | What it sets |\n|---|---|---|\n");
    for arg in command.get_arguments().filter(|arg| !arg.is_hide_set()) {
        let Some(long) = arg.get_long() else { continue };
        let key = long.replace('-', "_");
        let key = if FLAG_ONLY.contains(&key.as_str()) {
            "(flag only)".to_string()
        } else {
            format!("`{key}`")
        };
        let help = arg.get_help().map(|help| help.to_string()).unwrap_or_default();
        table.push_str(&format!("| `--{long}` | {key} | {} |\n", help.replace('|', "\\|")));
    }
    table
}

#[cfg(test)]
mod tests {
    use clap::Args;

    use super::*;

    /// The flags' names with `_` for `-`, and the type's keys: one set, but for
    /// [`FLAG_ONLY`].
    #[test]
    fn every_flag_has_its_config_key_and_every_key_its_flag() {
        let command = ServerSettings::augment_args(clap::Command::new("server"));
        let mut flags: Vec<String> = command
            .get_arguments()
            .filter_map(|arg| arg.get_long())
            .map(|long| long.replace('-', "_"))
            .filter(|key| !FLAG_ONLY.contains(&key.as_str()))
            .collect();
        let mut keys: Vec<String> = crate::settings_file::keys::<ServerSettings>()
            .into_iter()
            .filter(|key| !FLAG_ONLY.contains(&key.as_str()))
            .collect();
        flags.sort();
        keys.sort();
        assert_eq!(flags, keys);
        assert!(keys.len() > 30, "{keys:?}");
    }

    #[test]
    fn a_config_file_sets_what_the_flags_do_and_the_flags_win() {
        use clap::FromArgMatches;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(
            &path,
            "cores = 2\ninvoke_budget = \"50ms\"\nhello_timeout = \"2s\"\nfsync = \"always\"\nack = \"replica\"\n\
             tls_require_client_cert = true\n[[tenant]]\nid = 1\ntoken = \"a\"\nhome_core = 1\n",
        )
        .unwrap();
        let command = ServerSettings::augment_args(clap::Command::new("server"));
        let path_text = path.display().to_string();
        let matches = command
            .try_get_matches_from(["server", "--config", &path_text, "--cores", "4", "--tenant", "2:b"])
            .unwrap();
        let flags = ServerSettings::from_arg_matches(&matches).unwrap();
        let settings = layered(&flags).unwrap();
        assert_eq!(settings.cores, Some(4), "the flag wins");
        assert_eq!(settings.invoke_budget, Some(Duration::from_millis(50)));
        assert_eq!(settings.limits.hello_timeout, Some(Duration::from_secs(2)));
        assert_eq!(settings.fsync, Some(FsyncMode::Always));
        assert_eq!(settings.replication.ack, Some(Ack::Replica));
        assert!(settings.tls.tls_require_client_cert);
        let tenants: Vec<(u32, Option<usize>)> = settings.tenants.iter().map(|t| (t.id.0, t.home_core)).collect();
        assert_eq!(tenants, vec![(1, Some(1)), (2, None)]);

        std::fs::write(&path, "invoke_budget_ms = 50\n").unwrap();
        let err = layered(&flags).unwrap_err();
        assert!(err.contains("invoke_budget = \"100ms\""), "{err}");
        std::fs::write(&path, "listen_fd = 3\n").unwrap();
        assert!(layered(&flags).unwrap_err().contains("flag only"));
    }

    /// docs/ARCHITECTURE.md shows the table this type makes; when a setting changes, paste
    /// the table this test prints.
    #[test]
    fn the_settings_table_in_the_docs_is_the_definitions() {
        let docs = include_str!("../../../docs/ARCHITECTURE.md");
        let table = settings_table();
        assert!(
            docs.contains(&table),
            "docs/ARCHITECTURE.md's table of `ferry server`'s settings is not this one:\n\n{table}"
        );
    }
}
