//! Write-once equivalence: every built-in function, run remotely on one tenant and locally
//! on another holding the same data, gives the same results and leaves the same state.
//! And invocations stay serializable when remote and local ones race on the same data.

use crate::common;

use bytes::Bytes;
use common::*;
use ferry_client::{Client, ClientError};
use ferry_func::builtins::{aggregate, auth, traverse, ycsbt};

async fn load(client: &Client, table: &str, data: impl Iterator<Item = (Bytes, Bytes)>) {
    for (key, value) in data {
        client.put(table, &key, &value).await.unwrap();
    }
}

async fn load_everything(client: &Client) {
    load(client, traverse::TABLE, traverse::dataset(64, 48, 5)).await;
    load(client, ycsbt::TABLE, ycsbt::dataset(6, 24, 5)).await;
    load(client, aggregate::TABLE, aggregate::dataset(40, 16, 5)).await;
    load(client, auth::TABLE, auth::dataset(3, 4, 5).map(Result::unwrap)).await;
}

fn workload() -> Vec<(&'static str, Bytes)> {
    let mut calls: Vec<(&'static str, Bytes)> = vec![("noop", Bytes::new())];
    for (start, depth, compute_ns) in [(0, 1, 0), (3, 2, 1000), (17, 4, 0), (63, 8, 200), (64, 1, 0)] {
        calls.push((
            traverse::NAME,
            traverse::TraverseArgs {
                start,
                depth,
                compute_ns,
            }
            .encode(),
        ));
    }
    for args in [
        ycsbt::YcsbtArgs::Read {
            account: 2,
            compute_ns: 0,
        },
        ycsbt::YcsbtArgs::Transfer {
            from: 0,
            to: 1,
            amount: 7,
            compute_ns: 500,
        },
        ycsbt::YcsbtArgs::Transfer {
            from: 1,
            to: 0,
            amount: 3,
            compute_ns: 0,
        },
        ycsbt::YcsbtArgs::Transfer {
            from: 4,
            to: 4,
            amount: 1,
            compute_ns: 0,
        },
        ycsbt::YcsbtArgs::Transfer {
            from: 5,
            to: 2,
            amount: ycsbt::INITIAL_BALANCE + 1,
            compute_ns: 0,
        },
        ycsbt::YcsbtArgs::Transfer {
            from: 3,
            to: 99,
            amount: 1,
            compute_ns: 0,
        },
        ycsbt::YcsbtArgs::Read {
            account: 1,
            compute_ns: 0,
        },
    ] {
        calls.push((ycsbt::NAME, args.encode()));
    }
    for keys in [vec![0, 1, 2], vec![5, 500, 7, 39], vec![], (0..40).collect()] {
        calls.push((
            aggregate::NAME,
            aggregate::AggregateArgs { keys, compute_ns: 100 }.encode(),
        ));
    }
    for (user, password) in [(0, 0), (1, 2), (2, 2)] {
        let args = auth::AuthArgs {
            user: auth::username(user),
            password: auth::password(password),
        };
        calls.push((auth::NAME, args.encode()));
    }
    calls.push((
        auth::NAME,
        auth::AuthArgs {
            user: Bytes::from_static(b"ghost"),
            password: Bytes::new(),
        }
        .encode(),
    ));
    calls.push(("test.write", Bytes::from_static(b"written by a storage function")));
    calls
}

#[tokio::test]
async fn every_builtin_gives_the_same_result_and_state_remotely_and_locally() {
    let server = start(2);
    let remote = client_a(&server).await;
    let local = client_b(&server).await;
    load_everything(&remote).await;
    load_everything(&local).await;

    let mut compared = 0;
    for (function, args) in workload() {
        let by_rpc = remote.invoke_remote(function, args.clone()).await;
        let by_kv = local.invoke_local(function, args.clone()).await;
        match (&by_rpc, &by_kv) {
            (Ok(a), Ok(b)) => assert_eq!(a.result, b.result, "{function} results differ"),
            (Err(a), Err(b)) => assert_eq!(a, b, "{function} errors differ"),
            _ => panic!("{function}: remote gave {by_rpc:?}, local gave {by_kv:?}"),
        }
        compared += 1;
    }
    assert!(compared >= 20);
    for table in [traverse::TABLE, ycsbt::TABLE, aggregate::TABLE, auth::TABLE, "scratch"] {
        let a = server.table_snapshot(ferry_proto::TenantId(TENANT_A), table);
        let b = server.table_snapshot(ferry_proto::TenantId(TENANT_B), table);
        assert!(!a.is_empty(), "{table} should hold data");
        assert_eq!(a, b, "state of {table} differs between remote and local execution");
    }
    server.shutdown();
}

const ACCOUNTS: u64 = 5;

async fn balances(client: &Client) -> Vec<u64> {
    let mut out = Vec::new();
    for account in 0..ACCOUNTS {
        let value = client
            .get(ycsbt::TABLE, &account.to_le_bytes())
            .await
            .unwrap()
            .unwrap()
            .value;
        out.push(u64::from_le_bytes(value[..8].try_into().unwrap()));
    }
    out
}

/// Remote and local transfers race on five accounts; every transfer acknowledged as
/// applied must be reflected exactly once, and nothing else may change a balance.
#[tokio::test]
async fn racing_remote_and_local_transfers_are_applied_exactly_once() {
    let server = start(2);
    let setup = client_a(&server).await;
    load(&setup, ycsbt::TABLE, ycsbt::dataset(ACCOUNTS, 16, 1)).await;
    let tasks: Vec<_> = (0..6u64)
        .map(|task| {
            let server_addr = server.local_addr();
            tokio::spawn(async move {
                let mut config =
                    ferry_client::ClientConfig::new(server_addr.to_string(), ferry_proto::TenantId(TENANT_A), TOKEN_A);
                config.registry = registry();
                let client = Client::connect(config).await.unwrap();
                let mut applied = Vec::new();
                let mut aborted = 0;
                for i in 0..60u64 {
                    let from = (task + i) % ACCOUNTS;
                    let to = (task * 2 + i * 3 + 1) % ACCOUNTS;
                    let args = ycsbt::YcsbtArgs::Transfer {
                        from,
                        to,
                        amount: 1,
                        compute_ns: 2000,
                    }
                    .encode();
                    let outcome = if (task + i) % 2 == 0 {
                        client.invoke_remote(ycsbt::NAME, args).await
                    } else {
                        client.invoke_local(ycsbt::NAME, args).await
                    };
                    match outcome {
                        Ok(invocation) if invocation.result[0] == ycsbt::TRANSFER_APPLIED => {
                            if from != to {
                                applied.push((from, to));
                            }
                        }
                        Ok(_) => panic!("balances start at {} and cannot run dry here", ycsbt::INITIAL_BALANCE),
                        Err(ClientError::Server {
                            status: ferry_proto::Status::TxAbort,
                            ..
                        }) => aborted += 1,
                        Err(err) => panic!("unexpected {err}"),
                    }
                }
                (applied, aborted)
            })
        })
        .collect();
    let mut expected = vec![ycsbt::INITIAL_BALANCE; ACCOUNTS as usize];
    let mut applied_total = 0;
    for task in tasks {
        let (applied, _aborted) = task.await.unwrap();
        applied_total += applied.len();
        for (from, to) in applied {
            expected[from as usize] -= 1;
            expected[to as usize] += 1;
        }
    }
    assert!(
        applied_total > 100,
        "most transfers should get through, got {applied_total}"
    );
    let actual = balances(&setup).await;
    assert_eq!(actual, expected, "every acknowledged transfer applied exactly once");
    assert_eq!(actual.iter().sum::<u64>(), ACCOUNTS * ycsbt::INITIAL_BALANCE);
    server.shutdown();
}
