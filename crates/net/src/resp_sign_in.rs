//! Who a RESP connection signs in as: the user of AUTH and HELLO … AUTH, and the tenant a
//! connection's first bytes name (to start it on that tenant's home core).

use bytes::BytesMut;
use ferry_proto::TenantId;
use ferry_resp::Parser;

use crate::resp::DEFAULT_TENANT;

/// The tenant a connection's first command signs in as (`AUTH [user] password`, or
/// `HELLO protover AUTH user password`), read from bytes peeked before it is parsed for
/// real; `None` if they hold no such command (yet).
pub fn signs_in_as(first: &[u8]) -> Option<TenantId> {
    let mut bytes = BytesMut::from(first);
    let args = Parser::before_sign_in().next(&mut bytes).ok()??;
    let name = args.first()?;
    let user = if name.eq_ignore_ascii_case(b"AUTH") {
        match args.len() {
            2 => None,
            3 => Some(&args[1]),
            _ => return None,
        }
    } else if name.eq_ignore_ascii_case(b"HELLO") {
        let at = args.iter().position(|arg| arg.eq_ignore_ascii_case(b"AUTH"))?;
        Some(args.get(at + 1)?)
    } else {
        return None;
    };
    tenant_of_user(user.map(|user| &user[..]))
}

/// The tenant a RESP user name stands for: `default` (or none) is [`DEFAULT_TENANT`],
/// else the user is the tenant's id.
pub(crate) fn tenant_of_user(user: Option<&[u8]>) -> Option<TenantId> {
    match user {
        None | Some(b"default") => Some(DEFAULT_TENANT),
        Some(user) => std::str::from_utf8(user).ok()?.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(args: &[&str]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
        }
        out
    }

    #[test]
    fn the_first_auth_or_hello_names_the_tenant() {
        assert_eq!(signs_in_as(&command(&["AUTH", "7", "secret"])), Some(TenantId(7)));
        assert_eq!(
            signs_in_as(&command(&["auth", "default", "secret"])),
            Some(DEFAULT_TENANT)
        );
        assert_eq!(signs_in_as(&command(&["AUTH", "secret"])), Some(DEFAULT_TENANT));
        assert_eq!(
            signs_in_as(&command(&["HELLO", "3", "AUTH", "9", "secret"])),
            Some(TenantId(9))
        );
        let mut pipelined = command(&["AUTH", "4", "secret"]);
        pipelined.extend(command(&["GET", "k"]));
        assert_eq!(signs_in_as(&pipelined), Some(TenantId(4)));
    }

    #[test]
    fn anything_else_names_none() {
        assert_eq!(signs_in_as(&command(&["GET", "k"])), None);
        assert_eq!(signs_in_as(&command(&["HELLO", "3"])), None);
        assert_eq!(signs_in_as(&command(&["AUTH", "not-a-number", "secret"])), None);
        assert_eq!(signs_in_as(&command(&["AUTH", "1", "2", "3"])), None);
        // Cut short by the peek, or not RESP at all (a TLS hello).
        assert_eq!(signs_in_as(&command(&["AUTH", "7", "secret"])[..12]), None);
        assert_eq!(signs_in_as(b"\x16\x03\x01\x02\x00"), None);
        assert_eq!(signs_in_as(b""), None);
    }
}
