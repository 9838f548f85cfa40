//! A tenant's id: in every frame's header, a node's tables of tenants, its lanes and its
//! log's records. A type of its own, so an id is never taken for a count, a slot or a
//! version; on the wire and in a config file it is the number.

use std::fmt;
use std::str::FromStr;

/// The id of a tenant (the number its configuration gives it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct TenantId(pub u32);

impl fmt::Display for TenantId {
    /// The number, formatted as the number is (`{:010}` pads it: snapshot file names).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl FromStr for TenantId {
    type Err = std::num::ParseIntError;

    fn from_str(text: &str) -> Result<TenantId, Self::Err> {
        text.parse().map(TenantId)
    }
}

impl From<u32> for TenantId {
    fn from(id: u32) -> TenantId {
        TenantId(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_reads_and_prints_as_its_number() {
        assert_eq!("7".parse::<TenantId>(), Ok(TenantId(7)));
        assert!("seven".parse::<TenantId>().is_err());
        assert_eq!(TenantId(42).to_string(), "42");
        assert_eq!(format!("{:010}", TenantId(42)), "0000000042");
    }
}
