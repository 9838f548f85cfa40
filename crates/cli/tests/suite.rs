//! The crate's integration tests as one test binary (each file a module): one build and
//! one link instead of one per file, which was most of the workspace's test build time.
//! Timing-sensitive files stay binaries of their own, so nothing else runs beside them.

mod check_cli;
mod cluster_cli;
mod config_group_cli;
mod deploy_cli;
mod durability_cli;
mod failover_cli;
mod lua_cluster_cli;
mod placement_cli;
mod plan_cli;
mod replication_cli;
mod reshard_cli;
mod rolling_restart_cli;
mod server_cli;
mod sim_cli;
mod sim_suite_cli;
mod tls_cli;
