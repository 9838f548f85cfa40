//! INFO's sections: the text is `# Name` headers, each followed by `field:value` lines and
//! a blank line; `INFO a b` keeps the sections named (any case), as Redis does, and no
//! name, `default`, `all` or `everything` keeps them all (ferry's sections are all cheap
//! enough to be default ones). The `# Server` section is the same wherever INFO is
//! answered (a connection, a script).

use bytes::Bytes;

/// The Redis version ferry answers as (INFO's `redis_version`).
pub const REDIS_VERSION: &str = "7.2.0";

/// INFO's `# Server` section; `mode`: `standalone` or `cluster`.
pub fn server_section(mode: &str) -> String {
    format!(
        "# Server\r\nredis_version:{REDIS_VERSION}\r\nferry_version:{}\r\nredis_mode:{mode}\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    )
}

/// The sections of `text` that `wanted` names.
pub fn sections(text: &str, wanted: &[Bytes]) -> String {
    let everything = wanted.is_empty()
        || wanted.iter().any(|name| {
            ["default", "all", "everything"]
                .iter()
                .any(|all| name.eq_ignore_ascii_case(all.as_bytes()))
        });
    if everything {
        return text.to_string();
    }
    let mut out = String::new();
    let mut keeping = false;
    for line in text.split("\r\n") {
        if let Some(name) = line.strip_prefix("# ") {
            keeping = wanted.iter().any(|w| w.eq_ignore_ascii_case(name.trim().as_bytes()));
            if keeping && !out.is_empty() {
                out.push_str("\r\n");
            }
        }
        if keeping && !line.is_empty() {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# Server\r\nredis_version:7.2.0\r\n\r\n# Memory\r\nused_memory:10\r\n\r\n# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n";

    fn words(names: &[&str]) -> Vec<Bytes> {
        names.iter().map(|n| Bytes::from(n.to_string())).collect()
    }

    #[test]
    fn named_sections_are_kept_in_order_and_the_rest_dropped() {
        assert_eq!(sections(TEXT, &[]), TEXT);
        assert_eq!(sections(TEXT, &words(&["ALL"])), TEXT);
        assert_eq!(
            sections(TEXT, &words(&["keyspace"])),
            "# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n"
        );
        assert_eq!(
            sections(TEXT, &words(&["keyspace", "server"])),
            "# Server\r\nredis_version:7.2.0\r\n\r\n# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n"
        );
        assert_eq!(sections(TEXT, &words(&["cpu"])), "");
    }
}
