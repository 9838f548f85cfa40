//! The connection limits every listening process takes (storage node, gateway, compute node).

use std::time::Duration;

/// Flags bounding connections; unset ones keep the process's defaults (or config file).
#[derive(clap::Args, serde::Serialize, serde::Deserialize, Default, Debug, Clone)]
#[serde(default)]
pub struct ConnectionLimitArgs {
    /// Most simultaneous authenticated connections (default 4096).
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Longest a connection may take to authenticate before it is closed (default 5s).
    #[arg(long, value_parser = crate::flag_values::duration)]
    #[serde(with = "crate::flag_values::duration_text")]
    pub hello_timeout: Option<Duration>,
    /// Most connections waiting to authenticate at once, besides the authenticated ones
    /// (default 256); a new one evicts the oldest.
    #[arg(long)]
    pub max_unauthenticated: Option<usize>,
}
