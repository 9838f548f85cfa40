//! Every operation and every error status, over the real protocol, against a node on port 0.

use crate::common;

use bytes::{Bytes, BytesMut};
use common::*;
use ferry_client::ClientError;
use ferry_proto::{CommitWrite, ReadVersion, Request, ResponseBody, Status, HEADER_LEN};
use ferry_store::limits::{MAX_KEY_BYTES, MAX_VALUE_BYTES};

fn status_of<T: std::fmt::Debug>(result: Result<T, ClientError>) -> Status {
    result
        .expect_err("expected an error status")
        .status()
        .expect("a status from the node")
}

#[tokio::test]
async fn get_put_delete_multiget_commit_and_stats() {
    let server = start(2);
    let client = client_a(&server).await;
    assert_eq!(client.get("t", b"k").await.unwrap(), None);
    let v1 = client.put("t", b"k", b"one").await.unwrap();
    let got = client.get("t", b"k").await.unwrap().unwrap();
    assert_eq!((got.version, &got.value[..]), (v1, &b"one"[..]));
    let v2 = client.put("t", b"k", b"two").await.unwrap();
    assert!(v2 > v1, "versions grow");

    client.put("t", b"k2", b"second").await.unwrap();
    let keys = [
        Bytes::from_static(b"k"),
        Bytes::from_static(b"missing"),
        Bytes::from_static(b"k2"),
    ];
    let many = client.multiget("t", &keys).await.unwrap();
    assert_eq!(many[0].as_ref().unwrap().value, Bytes::from_static(b"two"));
    assert_eq!(many[1], None);
    assert_eq!(many[2].as_ref().unwrap().value, Bytes::from_static(b"second"));

    // Commit: read k at v2, write k and a brand-new key atomically.
    let reads = vec![ReadVersion {
        table: "t".into(),
        key: Bytes::from_static(b"k"),
        version: v2,
    }];
    let writes = vec![
        CommitWrite {
            table: "t".into(),
            key: Bytes::from_static(b"k"),
            value: Some(Bytes::from_static(b"three")),
        },
        CommitWrite {
            table: "other".into(),
            key: Bytes::from_static(b"new"),
            value: Some(Bytes::from_static(b"x")),
        },
        CommitWrite {
            table: "t".into(),
            key: Bytes::from_static(b"k2"),
            value: None,
        },
    ];
    let v3 = client.commit(reads.clone(), writes.clone()).await.unwrap();
    assert_eq!(client.get("t", b"k").await.unwrap().unwrap().version, v3);
    assert_eq!(
        client.get("other", b"new").await.unwrap().unwrap().value,
        Bytes::from_static(b"x")
    );
    assert_eq!(client.get("t", b"k2").await.unwrap(), None);
    // The same commit again is stale.
    assert_eq!(status_of(client.commit(reads, writes).await), Status::TxAbort);

    assert!(client.delete("t", b"k").await.unwrap());
    assert!(!client.delete("t", b"k").await.unwrap());
    assert_eq!(client.get("t", b"k").await.unwrap(), None);

    let invocation = client.invoke_remote("noop", Bytes::new()).await.unwrap();
    assert!(invocation.result.is_empty());
    let stats = client.stats().await.unwrap();
    let stat = |name: &str| stats.iter().find(|s| s.name == name).map(|s| s.value);
    assert_eq!(stat("node.workers"), Some(2));
    assert!(stat("tenant.1.requests").unwrap() >= 10);
    assert!(stat("tenant.1.cpu_ns").unwrap() > 0);
    assert_eq!(stat("tenant.1.invocations"), Some(1));
    assert!(
        stats.iter().all(|s| !s.name.starts_with("tenant.2.")),
        "no other tenant's counters"
    );
    server.shutdown();
}

#[tokio::test]
async fn responses_report_their_cost() {
    let server = start(1);
    let client = client_a(&server).await;
    client.put("t", b"k", &[7u8; 1000]).await.unwrap();
    let response = client
        .call(&Request::Get {
            table: "t".into(),
            key: Bytes::from_static(b"k"),
            validate: vec![],
        })
        .await
        .unwrap();
    assert_eq!(response.bytes_returned, 1000);
    assert!(response.cpu_ns > 0);
    // The emulated work (2 × 1 ms at this process's spin rate) shows up as node CPU time and,
    // run locally, as app CPU time. Its real duration is measured here, not assumed.
    let traverse_data = ferry_func::builtins::traverse::dataset(4, 16, 1);
    for (key, value) in traverse_data {
        client
            .put(ferry_func::builtins::traverse::TABLE, &key, &value)
            .await
            .unwrap();
    }
    let args = ferry_func::builtins::traverse::TraverseArgs {
        start: 0,
        depth: 2,
        compute_ns: 1_000_000,
    };
    // The reference is the CPU time of the same spin here, not its wall time: on a loaded
    // machine a preemption stretched the wall time past twice the node's measurement.
    // A quarter of it, not a half: in a loaded full-suite run the local side measured
    // 0.70 ms of CPU against a 1.48 ms reference (the calibrated spin runs faster or
    // slower with the other tests' load); the check is that the spin is counted at all.
    let spin_started = thread_cpu_ns();
    ferry_func::work::spin_ns(2 * args.compute_ns);
    let spin_ns = thread_cpu_ns() - spin_started;
    let invocation = client.invoke_remote("traverse", args.encode()).await.unwrap();
    assert!(
        invocation.cost.storage_cpu_ns >= spin_ns / 4,
        "{:?} vs {spin_ns}",
        invocation.cost
    );
    assert_eq!(invocation.cost.round_trips, 1);
    let local = client.invoke_local("traverse", args.encode()).await.unwrap();
    assert_eq!(local.cost.round_trips, 2, "two dependent gets, read-only: no commit");
    assert!(local.cost.app_cpu_ns >= spin_ns / 4, "{:?} vs {spin_ns}", local.cost);
    assert_eq!(local.result, invocation.result);
    server.shutdown();
}

#[tokio::test]
async fn not_found_too_large_unknown_function_and_function_failed() {
    let server = start(1);
    let client = client_a(&server).await;
    assert_eq!(client.get("t", b"nope").await.unwrap(), None);
    let raw = client
        .call(&Request::Get {
            table: "t".into(),
            key: Bytes::from_static(b"nope"),
            validate: vec![],
        })
        .await
        .unwrap();
    assert_eq!(raw.status, Status::NotFound);

    // A key past the longest the store and the wire take is refused before it is sent.
    let big_key = vec![b'k'; MAX_KEY_BYTES + 1];
    let refused = client.put("t", &big_key, b"v").await.unwrap_err();
    assert!(matches!(refused, ClientError::Encode(_)), "{refused}");
    // A value past what one frame of the ferry protocol carries is refused before it is
    // sent (the store itself takes values up to Redis's 512 MB, `MAX_VALUE_BYTES`).
    let big_value = vec![0u8; ferry_proto::MAX_BODY_BYTES as usize + 1];
    assert!(MAX_VALUE_BYTES > big_value.len());
    let refused = client.put("t", b"k", &big_value).await.unwrap_err();
    assert!(matches!(refused, ClientError::Encode(_)), "{refused}");
    assert_eq!(
        status_of(client.put("bad table!", b"k", b"v").await),
        Status::BadRequest
    );
    assert_eq!(status_of(client.put("t", b"", b"v").await), Status::BadRequest);

    assert_eq!(
        status_of(client.invoke_remote("no.such.fn", Bytes::new()).await),
        Status::UnknownFunction
    );
    assert_eq!(
        status_of(client.invoke_local("no.such.fn", Bytes::new()).await),
        Status::UnknownFunction
    );
    let failed = client.invoke_remote("test.fail", Bytes::new()).await.unwrap_err();
    assert_eq!(failed.status(), Some(Status::FunctionFailed));
    assert!(failed.to_string().contains("deliberate failure"), "{failed}");
    // Bad arguments to a built-in fail the invocation, on both sides alike.
    let remote = client
        .invoke_remote("traverse", Bytes::from_static(b"short"))
        .await
        .unwrap_err();
    let local = client
        .invoke_local("traverse", Bytes::from_static(b"short"))
        .await
        .unwrap_err();
    assert_eq!(remote, local);
    assert_eq!(remote.status(), Some(Status::FunctionFailed));
    server.shutdown();
}

#[tokio::test]
async fn quota_exceeded_is_too_large_and_changes_nothing() {
    let mut config = config(1);
    config.tenants[0].quota_bytes = 10_000;
    let server = start_with(config);
    let client = client_a(&server).await;
    client.put("t", b"a", &[1u8; 6000]).await.unwrap();
    let err = client.put("t", b"b", &[1u8; 6000]).await.unwrap_err();
    assert_eq!(err.status(), Some(Status::TooLarge));
    assert!(err.to_string().contains("quota"), "{err}");
    assert_eq!(client.get("t", b"b").await.unwrap(), None);
    server.shutdown();
}

#[tokio::test]
async fn unauthorized_before_hello_with_wrong_token_and_for_another_tenant() {
    let server = start(1);
    let mut raw = RawConn::connect(&server).await;
    // Anything before hello.
    raw.send(
        TENANT_A,
        1,
        &Request::Get {
            table: "t".into(),
            key: Bytes::from_static(b"k"),
            validate: vec![],
        },
    )
    .await;
    let (id, response) = raw.recv_response().await;
    assert_eq!((id, response.status), (1, Status::Unauthorized));
    // Wrong token, and an unknown tenant, look the same.
    assert_eq!(raw.hello(TENANT_A, "wrong").await.status, Status::Unauthorized);
    assert_eq!(raw.hello(99, TOKEN_A).await.status, Status::Unauthorized);
    // Third failure closes the connection.
    assert_eq!(raw.hello(TENANT_A, "wrong again").await.status, Status::Unauthorized);
    assert!(
        raw.recv().await.is_none(),
        "connection closed after repeated failed hellos"
    );

    let err = ferry_client::Client::connect(ferry_client::ClientConfig::new(
        server.local_addr().to_string(),
        ferry_proto::TenantId(TENANT_A),
        "nope",
    ))
    .await
    .err()
    .expect("wrong token refused");
    assert_eq!(err.status(), Some(Status::Unauthorized));

    // After hello as B, a frame claiming to be tenant A is refused.
    let mut raw = RawConn::connect(&server).await;
    assert_eq!(raw.hello(TENANT_B, TOKEN_B).await.status, Status::Ok);
    raw.send(
        TENANT_A,
        5,
        &Request::Put {
            table: "t".into(),
            key: Bytes::from_static(b"k"),
            value: Bytes::from_static(b"v"),
        },
    )
    .await;
    let (id, response) = raw.recv_response().await;
    assert_eq!((id, response.status), (5, Status::Unauthorized));
    // A second hello on an authenticated connection is a protocol error.
    assert_eq!(raw.hello(TENANT_B, TOKEN_B).await.status, Status::BadRequest);
    server.shutdown();
}

#[tokio::test]
async fn bad_request_for_malformed_bodies_and_unknown_opcodes() {
    let server = start(1);
    let mut raw = RawConn::connect(&server).await;
    assert_eq!(raw.hello(TENANT_A, TOKEN_A).await.status, Status::Ok);

    // A get whose body is truncated.
    let mut frame = BytesMut::new();
    Request::Get {
        table: "t".into(),
        key: Bytes::from_static(b"key"),
        validate: vec![],
    }
    .encode_frame(ferry_proto::TenantId(TENANT_A), 7, &mut frame)
    .unwrap();
    let body_len = frame.len() - HEADER_LEN - 2;
    frame.truncate(frame.len() - 2);
    frame[20..24].copy_from_slice(&(body_len as u32).to_le_bytes());
    raw.send_bytes(&frame).await;
    let (id, response) = raw.recv_response().await;
    assert_eq!((id, response.status), (7, Status::BadRequest));

    // An unknown opcode: answered bad_request with the raw opcode echoed.
    let mut frame = BytesMut::new();
    Request::Stats
        .encode_frame(ferry_proto::TenantId(TENANT_A), 8, &mut frame)
        .unwrap();
    frame[3] = 250;
    raw.send_bytes(&frame).await;
    match raw.recv_decoded().await.unwrap() {
        ferry_proto::Decoded::UnknownOpcode(answer) => {
            assert_eq!(
                (answer.opcode, answer.request_id, answer.status),
                (250, 8, Status::BadRequest)
            );
        }
        other => panic!("expected the unknown opcode echoed, got {other:?}"),
    }

    // The connection still works.
    raw.send(TENANT_A, 9, &Request::Stats).await;
    let (id, response) = raw.recv_response().await;
    assert_eq!((id, response.status), (9, Status::Ok));
    assert!(matches!(response.body, ResponseBody::Stats(_)));
    server.shutdown();
}

#[tokio::test]
async fn oversized_length_field_gets_too_large_then_a_clean_close() {
    let server = start(1);
    let mut raw = RawConn::connect(&server).await;
    assert_eq!(raw.hello(TENANT_A, TOKEN_A).await.status, Status::Ok);
    let mut frame = BytesMut::new();
    Request::Stats
        .encode_frame(ferry_proto::TenantId(TENANT_A), 3, &mut frame)
        .unwrap();
    frame[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
    raw.send_bytes(&frame).await;
    let (id, response) = raw.recv_response().await;
    assert_eq!((id, response.status), (3, Status::TooLarge));
    assert!(raw.recv().await.is_none());
    // Everyone else is still served.
    let client = client_a(&server).await;
    client.put("t", b"k", b"v").await.unwrap();
    server.shutdown();
}

#[tokio::test]
async fn overloaded_when_the_queue_is_full() {
    let mut config = config(1);
    config.queue_capacity = 2;
    let server = start_with(config);
    let client = client_a(&server).await;
    // Occupy the only worker for a while (a spin shorter than the budget's watchdog limit
    // would still be cut by it; 40 ms is under the 50 ms budget).
    let busy = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .invoke_remote("test.spin", Bytes::copy_from_slice(&40u64.to_le_bytes()))
                .await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    let puts: Vec<_> = (0..50u32)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move { client.put("t", &i.to_le_bytes(), b"v").await })
        })
        .collect();
    let mut overloaded = 0;
    let mut applied = 0;
    for put in puts {
        match put.await.unwrap() {
            Ok(_) => applied += 1,
            Err(err) if err.status() == Some(Status::Overloaded) => overloaded += 1,
            Err(err) => panic!("unexpected {err}"),
        }
    }
    assert!(overloaded > 0, "a queue of 2 behind a busy worker must overflow");
    assert!(applied > 0);
    busy.await.unwrap().unwrap();
    let stats = client.stats().await.unwrap();
    assert_eq!(
        stats.iter().find(|s| s.name == "tenant.1.overloaded").unwrap().value,
        overloaded
    );
    server.shutdown();
}

/// CPU time of the calling thread, ns.
fn thread_cpu_ns() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes only into `now`, a valid timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}
