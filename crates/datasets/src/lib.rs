//! The built-in functions' data sets and loading them into a node (or a gateway) through
//! the client. `ferry load` and the benchmarks share this, so a production command does not
//! need the benchmark crate to fill a node.
//!
//! Layout:
//! - [`load`]: [`load_dataset`], a table's objects written with pipelined puts, and
//!   [`Table`], the rows of one table.
//! - [`catalog`]: the data sets by name as `ferry load` offers them ([`Dataset`]), their
//!   defaults and limits, and [`LoadSpec::build`], which makes their tables.
//! - [`social`]: the social application's graph and users ([`load_social`]).
//! - [`conservation`]: YCSB-T's invariant, the total of all balances, checked after a run.

pub mod catalog;
pub mod conservation;
pub mod load;
pub mod social;

pub use catalog::{Dataset, LoadSpec};
pub use conservation::ycsbt_total_is_conserved;
pub use load::{load_dataset, load_tables, Table, LOAD_CONCURRENCY};
pub use social::load_social;

use thiserror::Error;

/// Why a data set could not be built, loaded or checked.
#[derive(Debug, Error)]
pub enum DatasetError {
    /// The client failed (connection, refusal by the node).
    #[error(transparent)]
    Client(#[from] ferry_client::ClientError),
    /// A data set's content could not be made (an auth user's password hash).
    #[error("cannot build the data set: {0}")]
    Build(#[from] ferry_func::FnError),
    /// No data set has this name.
    #[error("unknown data set {0:?}: use {names}", names = catalog::DATASET_NAMES)]
    Unknown(String),
    /// A setting is outside its limits.
    #[error("invalid data set setting: {0}")]
    Invalid(String),
    /// A loading task died (it panicked or was cancelled).
    #[error("a loading task failed: {0}")]
    Loader(String),
    /// The loaded data does not have the form its data set gives it.
    #[error("the data set is damaged: {0}")]
    Damaged(String),
}
