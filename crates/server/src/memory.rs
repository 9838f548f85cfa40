//! A tenant's memory as Redis's clients see it: CONFIG's `maxmemory` (the tenant's limit,
//! at most its configured quota) and `maxmemory-policy`, and INFO's memory and eviction
//! lines. The store does the limiting and the evicting (`ferry_store::eviction`).

use ferry_resp::config::memory_bytes;
use ferry_store::eviction::POLICIES;
use ferry_store::EvictionPolicy;

use crate::node::TenantState;

/// The tenant's value of a per-tenant CONFIG parameter.
pub(crate) fn param(tenant: &TenantState, name: &str) -> Option<String> {
    match name {
        "maxmemory" => Some(tenant.store.limit_bytes().to_string()),
        "maxmemory-policy" => Some(tenant.store.eviction().name().to_string()),
        _ => None,
    }
}

/// Sets per-tenant CONFIG parameters: each is checked, then all are set.
pub(crate) fn set_params(tenant: &TenantState, pairs: &[(&'static str, String)]) -> Result<(), String> {
    let mut limit = None;
    let mut policy = None;
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
            other => return Err(format!("{other} is not kept per tenant")),
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
    Ok(())
}

/// INFO's `# Memory` and `# Stats` lines for the tenant.
pub(crate) fn info(tenant: &TenantState) -> String {
    let stats = tenant.store.stats();
    format!(
        "\r\n# Memory\r\nused_memory:{}\r\nmaxmemory:{}\r\nmaxmemory_policy:{}\r\n\r\n# Stats\r\nevicted_keys:{}\r\n",
        stats.used_bytes,
        stats.quota_bytes,
        tenant.store.eviction().name(),
        stats.evicted_keys
    )
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
