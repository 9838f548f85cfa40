//! A tenant's memory as Redis's clients see it: CONFIG's `maxmemory` (the tenant's limit,
//! at most its configured quota), `maxmemory-policy` and the encoding thresholds
//! (`hash-max-listpack-entries` and the others: when collections leave their compact
//! encodings), and INFO's memory and eviction lines. The store does the limiting, the
//! evicting (`ferry_store::eviction`) and the encoding (`ferry_value`).

use ferry_resp::config::memory_bytes;
use ferry_resp::reply::OUT_OF_MEMORY;
use ferry_store::eviction::POLICIES;
use ferry_store::{EvictionPolicy, StoreError, TableKeys};
use ferry_value::Encodings;

use crate::node::TenantState;

/// A store refusal's text; a write past the memory limit in Redis's words (`OOM …`, with
/// the store's figures after them), whichever path the write took (a data command, a
/// MULTI, a function's or a library's commit), so RESP clients raise their out-of-memory
/// error.
pub(crate) fn refusal_text(err: &StoreError) -> String {
    match err {
        StoreError::QuotaExceeded { .. } => format!("{OUT_OF_MEMORY} ({err})"),
        other => other.to_string(),
    }
}

/// A field of the tenant's encoding thresholds, by its CONFIG name.
fn threshold<'e>(encodings: &'e mut Encodings, name: &str) -> Option<Threshold<'e>> {
    Some(match name {
        "hash-max-listpack-entries" => Threshold::Count(&mut encodings.hash_max_listpack_entries),
        "hash-max-listpack-value" => Threshold::Count(&mut encodings.hash_max_listpack_value),
        "set-max-intset-entries" => Threshold::Count(&mut encodings.set_max_intset_entries),
        "set-max-listpack-entries" => Threshold::Count(&mut encodings.set_max_listpack_entries),
        "set-max-listpack-value" => Threshold::Count(&mut encodings.set_max_listpack_value),
        "zset-max-listpack-entries" => Threshold::Count(&mut encodings.zset_max_listpack_entries),
        "zset-max-listpack-value" => Threshold::Count(&mut encodings.zset_max_listpack_value),
        "list-max-listpack-size" => Threshold::ListSize(&mut encodings.list_max_listpack_size),
        _ => return None,
    })
}

/// An encoding threshold to read or set.
enum Threshold<'e> {
    /// A count or a length (Redis takes 0 and up).
    Count(&'e mut usize),
    /// `list-max-listpack-size`: items per node if 0 and up, -1 to -5 a node's bytes.
    ListSize(&'e mut i64),
}

impl Threshold<'_> {
    fn get(&self) -> String {
        match self {
            Threshold::Count(value) => value.to_string(),
            Threshold::ListSize(value) => value.to_string(),
        }
    }

    /// Sets it from CONFIG's text, checked as Redis checks it.
    fn set(&mut self, text: &str) -> Result<(), String> {
        let number: i64 = text
            .parse()
            .map_err(|_| format!("argument couldn't be parsed into an integer: {text:?}"))?;
        match self {
            Threshold::Count(value) => {
                **value = usize::try_from(number)
                    .map_err(|_| "argument must be between 0 and 9223372036854775807 inclusive".to_string())?;
            }
            // Redis takes any int: a count if 0 and up (0 meaning 1), a size class below
            // (-6 and lower meaning -5's).
            Threshold::ListSize(value) if i32::try_from(number).is_ok() => **value = number,
            Threshold::ListSize(_) => {
                return Err("argument must be between -2147483648 and 2147483647 inclusive".into())
            }
        }
        Ok(())
    }
}

/// The tenant's value of a per-tenant CONFIG parameter.
pub(crate) fn param(tenant: &TenantState, name: &str) -> Option<String> {
    match name {
        "maxmemory" => Some(tenant.store.limit_bytes().to_string()),
        "maxmemory-policy" => Some(tenant.store.eviction().name().to_string()),
        other => threshold(&mut tenant.store.encodings(), other).map(|t| t.get()),
    }
}

/// Sets per-tenant CONFIG parameters: each is checked, then all are set.
pub(crate) fn set_params(tenant: &TenantState, pairs: &[(&'static str, String)]) -> Result<(), String> {
    let mut limit = None;
    let mut policy = None;
    let mut encodings = tenant.store.encodings();
    for (name, value) in pairs {
        match *name {
            "maxmemory" => {
                let bytes = memory_bytes(value).ok_or_else(|| format!("argument must be a memory value: {value:?}"))?;
                if bytes > tenant.store.ceiling_bytes() {
                    return Err(format!(
                        "maxmemory {bytes} is above this tenant's quota of {} bytes (0 sets the quota)",
                        tenant.store.ceiling_bytes()
                    ));
                }
                limit = Some(bytes);
            }
            "maxmemory-policy" => {
                policy = Some(EvictionPolicy::parse(value).ok_or_else(|| {
                    let names: Vec<&str> = POLICIES.iter().map(|policy| policy.name()).collect();
                    format!("argument must be one of the following: {}", names.join(", "))
                })?);
            }
            other => match threshold(&mut encodings, other) {
                Some(mut field) => field.set(value)?,
                None => return Err(format!("{other} is not kept per tenant")),
            },
        }
    }
    if let Some(bytes) = limit {
        // Checked against the ceiling above; the store checks again.
        tenant
            .store
            .set_limit_bytes(bytes)
            .map_err(|ceiling| format!("above the quota of {ceiling} bytes"))?;
    }
    if let Some(policy) = policy {
        tenant.store.set_eviction(policy);
    }
    tenant.store.set_encodings(encodings);
    Ok(())
}

/// INFO's `# Memory`, `# Stats` and `# Keyspace` lines for the tenant. The keyspace
/// lists the databases (tables `db<N>`) that hold keys, in Redis's form; `avg_ttl` is 0
/// (Redis estimates it from its expiry sampling; ferry does not estimate it).
pub(crate) fn info(tenant: &TenantState) -> String {
    let stats = tenant.store.stats();
    let mut text = format!(
        "# Memory\r\nused_memory:{}\r\nmaxmemory:{}\r\nmaxmemory_policy:{}\r\n\r\n# Stats\r\nevicted_keys:{}\r\n\r\n# Keyspace\r\n",
        stats.used_bytes,
        stats.quota_bytes,
        tenant.store.eviction().name(),
        stats.evicted_keys
    );
    let mut databases: Vec<(u32, TableKeys)> = tenant
        .store
        .keyspace()
        .into_iter()
        .filter_map(|table| Some((database_of(&table.table)?, table)))
        .collect();
    databases.sort_by_key(|(index, _)| *index);
    for (index, table) in databases {
        text.push_str(&format!(
            "db{index}:keys={},expires={},avg_ttl=0\r\n",
            table.keys, table.expires
        ));
    }
    text
}

/// INFO as a script of the tenant reads it: the server section, then [`info`]'s (a script
/// has no connection, so no clients section); `cluster`: the node is one of a cluster's.
pub(crate) fn script_info(tenant: &TenantState, cluster: bool) -> String {
    let mode = if cluster { "cluster" } else { "standalone" };
    ferry_resp::info::server_section(mode) + &info(tenant)
}

/// The database index of a table named as SELECT names them (`db<N>`).
fn database_of(table: &str) -> Option<u32> {
    let digits = table.strip_prefix("db")?;
    let index: u32 = digits.parse().ok()?;
    (ferry_net::resp::table_of(index) == table).then_some(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_and_policy_are_set_together_or_not_at_all() {
        let tenant = TenantState::for_test(1, 10_000);
        set_params(
            &tenant,
            &[("maxmemory", "1kb".into()), ("maxmemory-policy", "allkeys-lfu".into())],
        )
        .unwrap();
        assert_eq!(param(&tenant, "maxmemory").as_deref(), Some("1024"));
        assert_eq!(param(&tenant, "maxmemory-policy").as_deref(), Some("allkeys-lfu"));
        let refused = set_params(
            &tenant,
            &[("maxmemory-policy", "volatile-ttl".into()), ("maxmemory", "1mb".into())],
        );
        assert!(refused.unwrap_err().contains("quota of 10000"));
        assert_eq!(param(&tenant, "maxmemory-policy").as_deref(), Some("allkeys-lfu"));
        assert!(set_params(&tenant, &[("maxmemory-policy", "lru".into())])
            .unwrap_err()
            .contains("allkeys-lru"));
        set_params(&tenant, &[("maxmemory", "0".into())]).unwrap();
        assert_eq!(param(&tenant, "maxmemory").as_deref(), Some("10000"));
        assert!(info(&tenant).contains("maxmemory_policy:allkeys-lfu\r\n"));
    }
}
