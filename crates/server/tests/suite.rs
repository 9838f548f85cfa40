//! The crate's integration tests as one test binary (each file a module): one build and
//! one link instead of one per file, which was most of the workspace's test build time.
//! Timing-sensitive files stay binaries of their own, so nothing else runs beside them.

mod cluster;
mod cluster_functions;
mod common;
mod core_loop;
mod durability;
mod equivalence;
mod isolation_and_faults;
mod metrics;
mod operations;
mod preemption;
mod pushback;
mod read_part;
mod resp;
mod resp_blocking;
mod resp_clients;
mod resp_database;
mod resp_encodings;
mod resp_functions;
mod resp_memory;
mod resp_scripts;
mod resp_transactions;
mod script_database;
mod three_paths;
