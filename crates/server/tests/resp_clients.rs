//! CLIENT over RESP: a tenant lists and kills its own connections, never another's.

use crate::common::{resp_connect, resp_node, TENANT_A, TENANT_B, TOKEN_A, TOKEN_B};

#[test]
fn client_list_and_kill_reach_only_the_tenant_s_own_connections() {
    let server = resp_node();
    let mut mine = resp_connect(&server, TENANT_A, TOKEN_A);
    let mut also_mine = resp_connect(&server, TENANT_A, TOKEN_A);
    let mut theirs = resp_connect(&server, TENANT_B, TOKEN_B);
    let () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("worker-2")
        .query(&mut also_mine)
        .unwrap();
    let my_id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut mine).unwrap();
    let their_id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut theirs).unwrap();
    assert_ne!(my_id, their_id);
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut mine).unwrap();
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(
        list.contains("name=worker-2") && list.contains(&format!("id={my_id} ")),
        "{list}"
    );
    assert!(
        !list.contains(&format!("id={their_id} ")),
        "another tenant's connection listed: {list}"
    );
    // Another tenant's connection cannot be killed by id; one's own can.
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(their_id)
        .query(&mut mine)
        .unwrap();
    assert_eq!(killed, 0);
    let () = redis::cmd("PING").query(&mut theirs).unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("USER")
        .arg(TENANT_A.to_string())
        .query(&mut mine)
        .unwrap();
    assert_eq!(killed, 1, "the caller skips itself by default");
    let closed = (0..50).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(20));
        redis::cmd("PING").query::<()>(&mut also_mine).is_err()
    });
    assert!(closed, "the killed connection was closed");
    let () = redis::cmd("PING").query(&mut mine).unwrap();
    let info: String = redis::cmd("CLIENT").arg("INFO").query(&mut mine).unwrap();
    assert!(
        info.contains(&format!("user={TENANT_A}")) && info.contains("cmd=client"),
        "{info}"
    );
}
