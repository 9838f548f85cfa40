//! The built-in functions' data sets by name, as `ferry load` offers them: each one's
//! defaults and limits, and how to build its tables.

use ferry_func::builtins::{aggregate, auth, traverse, ycsbt};

use crate::load::Table;
use crate::social::social_tables;
use crate::DatasetError;

/// Largest data set one load builds (objects): a bound on what is held in memory at once.
pub const MAX_LOAD_OBJECTS: u64 = 100_000_000;

/// Most social vertices one load generates (about 67 KiB each, held in memory at once).
pub const MAX_SOCIAL_VERTICES: u64 = 100_000;

/// The names [`Dataset::parse`] accepts, as an error message lists them.
pub const DATASET_NAMES: &str = "traverse, ycsbt, aggregate, auth or social";

/// Name of the social application's data set (it has no function of that name).
const SOCIAL: &str = "social";

/// Objects loaded when none are asked for: enough that accesses spread over the table.
const DEFAULT_OBJECTS: u64 = 100_000;

/// Users loaded when none are asked for: each costs an scrypt hash to build.
const DEFAULT_AUTH_USERS: u64 = 1_000;

/// Social vertices loaded when none are asked for (about 130 MiB).
const DEFAULT_SOCIAL_VERTICES: u64 = 2_000;

/// A built-in function's data set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dataset {
    /// The graph `traverse` walks (one object per node).
    Traverse,
    /// YCSB-T's accounts.
    Ycsbt,
    /// The samples `aggregate` sums.
    Aggregate,
    /// `auth`'s users with scrypt password hashes.
    Auth,
    /// The social application's graph (four tables) and one `auth` user per vertex.
    Social,
}

impl Dataset {
    /// The data set named `name` (a function's name, or `social`).
    pub fn parse(name: &str) -> Result<Dataset, DatasetError> {
        match name {
            traverse::NAME => Ok(Dataset::Traverse),
            ycsbt::NAME => Ok(Dataset::Ycsbt),
            aggregate::NAME => Ok(Dataset::Aggregate),
            auth::NAME => Ok(Dataset::Auth),
            SOCIAL => Ok(Dataset::Social),
            other => Err(DatasetError::Unknown(other.to_string())),
        }
    }

    /// Its name, as [`Dataset::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Dataset::Traverse => traverse::NAME,
            Dataset::Ycsbt => ycsbt::NAME,
            Dataset::Aggregate => aggregate::NAME,
            Dataset::Auth => auth::NAME,
            Dataset::Social => SOCIAL,
        }
    }

    /// Objects (nodes, accounts, samples, users or social vertices) loaded by default.
    pub fn default_objects(self) -> u64 {
        match self {
            Dataset::Auth => DEFAULT_AUTH_USERS,
            Dataset::Social => DEFAULT_SOCIAL_VERTICES,
            Dataset::Traverse | Dataset::Ycsbt | Dataset::Aggregate => DEFAULT_OBJECTS,
        }
    }

    /// Most objects one load may ask for.
    pub fn max_objects(self) -> u64 {
        match self {
            Dataset::Social => MAX_SOCIAL_VERTICES,
            _ => MAX_LOAD_OBJECTS,
        }
    }

    /// Bytes per value by default; `None` where values have a fixed form (auth, social).
    pub fn default_value_bytes(self) -> Option<usize> {
        match self {
            Dataset::Traverse => Some(64),
            Dataset::Ycsbt => Some(100),
            Dataset::Aggregate => Some(16),
            Dataset::Auth | Dataset::Social => None,
        }
    }
}

/// One data set to build.
#[derive(Clone, Copy, Debug)]
pub struct LoadSpec {
    /// Which data set.
    pub dataset: Dataset,
    /// Objects (nodes, accounts, samples, users or social vertices).
    pub objects: u64,
    /// Bytes per value (ignored by auth and social); `None`: the data set's default.
    pub value_bytes: Option<usize>,
    /// Seed of the pseudo-random content.
    pub seed: u64,
    /// scrypt cost (log2 N) of auth users (auth and social).
    pub log_n: u8,
}

impl LoadSpec {
    /// Builds the data set's tables, after checking the object count and scrypt cost
    /// against their limits (the error names the setting at fault).
    pub fn build(&self) -> Result<Vec<Table>, DatasetError> {
        let max = self.dataset.max_objects();
        if self.objects == 0 || self.objects > max {
            return Err(DatasetError::Invalid(format!(
                "{} objects of {}: must be 1..={max}",
                self.objects,
                self.dataset.name()
            )));
        }
        if self.log_n == 0 || self.log_n > auth::MAX_LOG_N {
            return Err(DatasetError::Invalid(format!(
                "scrypt cost {} must be 1..={}",
                self.log_n,
                auth::MAX_LOG_N
            )));
        }
        let value_bytes = self.value_bytes.or(self.dataset.default_value_bytes()).unwrap_or(0);
        let (keys, seed) = (self.objects, self.seed);
        let table = |name, rows| vec![Table { name, rows }];
        Ok(match self.dataset {
            Dataset::Traverse => table(traverse::TABLE, traverse::dataset(keys, value_bytes, seed).collect()),
            Dataset::Ycsbt => table(ycsbt::TABLE, ycsbt::dataset(keys, value_bytes, seed).collect()),
            Dataset::Aggregate => table(aggregate::TABLE, aggregate::dataset(keys, value_bytes, seed).collect()),
            Dataset::Auth => table(
                auth::TABLE,
                auth::dataset(keys, self.log_n, seed).collect::<Result<_, _>>()?,
            ),
            Dataset::Social => social_tables(keys, self.log_n, seed)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_are_refused() {
        for dataset in [
            Dataset::Traverse,
            Dataset::Ycsbt,
            Dataset::Aggregate,
            Dataset::Auth,
            Dataset::Social,
        ] {
            assert_eq!(Dataset::parse(dataset.name()).unwrap(), dataset);
            assert!(DATASET_NAMES.contains(dataset.name()));
        }
        let err = Dataset::parse("nonsense").unwrap_err();
        assert!(err.to_string().contains("unknown data set"), "{err}");
    }

    #[test]
    fn a_spec_builds_its_objects_with_the_default_value_size() {
        let spec = LoadSpec {
            dataset: Dataset::Traverse,
            objects: 10,
            value_bytes: None,
            seed: 1,
            log_n: auth::DEFAULT_LOG_N,
        };
        let tables = spec.build().unwrap();
        assert_eq!(tables.len(), 1);
        assert_eq!(tables[0].name, traverse::TABLE);
        assert_eq!(tables[0].rows.len(), 10);
        assert_eq!(tables[0].rows[0].1.len(), 64);
    }

    #[test]
    fn counts_and_costs_outside_their_limits_are_refused() {
        let spec = LoadSpec {
            dataset: Dataset::Social,
            objects: MAX_SOCIAL_VERTICES + 1,
            value_bytes: None,
            seed: 1,
            log_n: auth::DEFAULT_LOG_N,
        };
        assert!(matches!(spec.build(), Err(DatasetError::Invalid(_))));
        let spec = LoadSpec {
            dataset: Dataset::Auth,
            objects: 1,
            log_n: 0,
            ..spec
        };
        assert!(matches!(spec.build(), Err(DatasetError::Invalid(_))));
    }
}
