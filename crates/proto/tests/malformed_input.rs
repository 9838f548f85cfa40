//! Property tests: the decoders never panic, hang or over-allocate on arbitrary bytes, and
//! every well-formed message survives an encode/decode round trip.

use bytes::{Bytes, BytesMut};
use ferry_proto::{
    CommitWrite, DecodeError, Decoded, FrameDecoder, FrameKind, InvokeCosts, InvokeTrace, MultiGetEntry, Opcode,
    ReadVersion, Request, Response, ResponseBody, Status, HEADER_LEN,
};
use proptest::prelude::*;

/// Feeds `chunks` to a decoder as a connection would, decoding every body it yields.
/// Returns how many frames came out; stops at the first fatal framing error.
fn drive(chunks: &[Vec<u8>]) -> usize {
    let mut decoder = FrameDecoder::new();
    let mut buf = BytesMut::new();
    let mut frames = 0;
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match decoder.decode(&mut buf) {
                Ok(None) => break,
                Err(_) => return frames,
                Ok(Some(Decoded::UnknownOpcode(_))) => frames += 1,
                Ok(Some(Decoded::Frame(frame))) => {
                    frames += 1;
                    assert_eq!(frame.body.len(), frame.header.body_len as usize);
                    match frame.header.kind {
                        FrameKind::Request => {
                            let _ = Request::decode(frame.header.opcode, frame.body);
                        }
                        FrameKind::Response => {
                            let _ = Response::decode(&frame.header, frame.body);
                        }
                    }
                }
            }
        }
    }
    frames
}

/// A valid header prefix followed by arbitrary bytes: reaches the body decoders far more
/// often than uniformly random bytes, which almost always fail the magic check.
fn header_then_garbage() -> impl Strategy<Value = Vec<u8>> {
    (
        1u8..=12,
        any::<bool>(),
        0u8..=9,
        0u32..64,
        proptest::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(opcode, response, status, tenant, body)| {
            let mut out = Vec::with_capacity(HEADER_LEN + body.len());
            out.extend_from_slice(b"FY");
            out.push(1);
            out.push(opcode);
            out.push(u8::from(response));
            out.push(if response { status } else { 0 });
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&tenant.to_le_bytes());
            out.extend_from_slice(&7u64.to_le_bytes());
            out.extend_from_slice(&(body.len() as u32).to_le_bytes());
            out.extend_from_slice(&[0; 16]);
            out.extend_from_slice(&body);
            out
        })
}

fn bytes_strategy(max: usize) -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

fn read_version() -> impl Strategy<Value = ReadVersion> {
    ("[a-z]{0,8}", bytes_strategy(16), any::<u64>()).prop_map(|(table, key, version)| ReadVersion {
        table,
        key,
        version,
    })
}

fn request_strategy() -> impl Strategy<Value = Request> {
    prop_oneof![
        bytes_strategy(32).prop_map(|token| Request::Hello { token }),
        (
            "[a-z]{0,8}",
            bytes_strategy(16),
            proptest::collection::vec(read_version(), 0..4)
        )
            .prop_map(|(table, key, validate)| Request::Get { table, key, validate }),
        ("[a-z]{0,8}", bytes_strategy(16), bytes_strategy(64)).prop_map(|(table, key, value)| Request::Put {
            table,
            key,
            value
        }),
        ("[a-z]{0,8}", bytes_strategy(16)).prop_map(|(table, key)| Request::Delete { table, key }),
        (
            "[a-z]{0,8}",
            proptest::collection::vec(bytes_strategy(8), 0..8),
            proptest::collection::vec(read_version(), 0..4),
            proptest::collection::vec((any::<u64>(), any::<u64>()), 0..3)
        )
            .prop_map(|(table, keys, validate, snapshots)| Request::MultiGet {
                table,
                keys,
                validate,
                snapshots: snapshots
                    .into_iter()
                    .map(|(clock, version)| ferry_proto::Snapshot { clock, version })
                    .collect(),
            }),
        (
            "[a-z_]{0,12}",
            bytes_strategy(64),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(
                |(function, args, allow_pushback, trace, handoff, costs)| Request::Invoke {
                    function,
                    args,
                    allow_pushback,
                    trace,
                    handoff,
                    costs,
                }
            ),
        (
            proptest::collection::vec(read_version(), 0..4),
            proptest::collection::vec(
                (
                    "[a-z]{0,8}",
                    bytes_strategy(8),
                    proptest::option::of(bytes_strategy(16))
                )
                    .prop_map(|(table, key, value)| CommitWrite { table, key, value }),
                0..4
            )
        )
            .prop_map(|(reads, writes)| Request::Commit { reads, writes }),
        Just(Request::Stats),
        Just(Request::Info),
        (
            "[a-z]{0,8}",
            bytes_strategy(16),
            proptest::collection::vec(bytes_strategy(8), 0..5),
            proptest::collection::vec((any::<u64>(), any::<u64>()), 0..3)
        )
            .prop_map(|(table, key, command, snapshots)| Request::ReadPart {
                table,
                key,
                command,
                snapshots: snapshots
                    .into_iter()
                    .map(|(clock, version)| ferry_proto::Snapshot { clock, version })
                    .collect(),
            }),
        (
            proptest::collection::vec("[a-z0-9]{0,8}", 0..4),
            proptest::collection::vec((any::<u64>(), any::<u64>()), 0..3)
        )
            .prop_map(|(tables, snapshots)| Request::List {
                tables,
                snapshots: snapshots
                    .into_iter()
                    .map(|(clock, version)| ferry_proto::Snapshot { clock, version })
                    .collect(),
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..128), 0..8)) {
        drive(&chunks);
    }

    #[test]
    fn valid_headers_with_garbage_bodies_never_panic(frames in proptest::collection::vec(header_then_garbage(), 1..6), split in 0usize..512) {
        let wire: Vec<u8> = frames.concat();
        let split = split.min(wire.len());
        // Every frame is whole, so all of them must come out, however the bytes are split.
        let decoded = drive(&[wire[..split].to_vec(), wire[split..].to_vec()]);
        prop_assert_eq!(decoded, frames.len());
    }

    #[test]
    fn requests_round_trip(request in request_strategy(), request_id in any::<u64>(), tenant in any::<u32>()) {
        let mut buf = BytesMut::new();
        request.encode_frame(ferry_proto::TenantId(tenant), request_id, &mut buf).unwrap();
        let mut decoder = FrameDecoder::new();
        let Some(Decoded::Frame(frame)) = decoder.decode(&mut buf).unwrap() else {
            panic!("a whole frame was encoded");
        };
        prop_assert_eq!(frame.header.request_id, request_id);
        prop_assert_eq!(frame.header.tenant.0, tenant);
        prop_assert_eq!(Request::decode(frame.header.opcode, frame.body).unwrap(), request);
    }

    #[test]
    fn multiget_responses_round_trip(entries in proptest::collection::vec((any::<u64>(), proptest::option::of(bytes_strategy(32))), 0..16), cpu_ns in any::<u64>(), snapshot in proptest::option::of((any::<u64>(), any::<u64>()))) {
        let response = Response {
            status: Status::Ok,
            cpu_ns,
            bytes_returned: 5,
            admission_rate_ops: 7,
            body: ResponseBody::MultiGet {
                entries: entries.into_iter().map(|(version, value)| MultiGetEntry { version, value }).collect(),
                snapshot: snapshot.map(|(clock, version)| ferry_proto::Snapshot { clock, version }),
            },
        };
        let mut buf = BytesMut::new();
        response.encode_frame(Opcode::MultiGet, ferry_proto::TenantId(3), 9, &mut buf).unwrap();
        let Some(Decoded::Frame(frame)) = FrameDecoder::new().decode(&mut buf).unwrap() else {
            panic!("a whole frame was encoded");
        };
        prop_assert_eq!(Response::decode(&frame.header, frame.body).unwrap(), response);
    }

    #[test]
    fn list_responses_round_trip(
        tables in proptest::collection::vec(
            proptest::collection::vec((bytes_strategy(8), 0usize..5, proptest::option::of(any::<u64>())), 0..6),
            0..4,
        ),
        snapshot in (any::<u64>(), any::<u64>()),
    ) {
        let response = Response::ok(ResponseBody::List {
            tables: tables
                .into_iter()
                .map(|keys| {
                    keys.into_iter()
                        .map(|(key, code, expires_at_ms)| ferry_proto::ListedKey {
                            key,
                            type_name: ferry_proto::TYPE_NAMES[code],
                            expires_at_ms,
                        })
                        .collect()
                })
                .collect(),
            snapshot: ferry_proto::Snapshot { clock: snapshot.0, version: snapshot.1 },
        });
        let mut buf = BytesMut::new();
        response.encode_frame(Opcode::List, ferry_proto::TenantId(3), 9, &mut buf).unwrap();
        let Some(Decoded::Frame(frame)) = FrameDecoder::new().decode(&mut buf).unwrap() else {
            panic!("a whole frame was encoded");
        };
        prop_assert_eq!(Response::decode(&frame.header, frame.body).unwrap(), response);
    }

    #[test]
    fn invoke_responses_round_trip_with_and_without_costs_and_a_trace(
        result in bytes_strategy(32),
        costs in proptest::option::of((any::<u64>(), any::<u64>(), any::<u64>(), any::<u32>(), any::<u32>(), any::<(bool, bool)>())),
        trace in proptest::option::of((
            proptest::collection::vec(read_version(), 0..4),
            proptest::collection::vec(read_version(), 0..4),
        )),
        admission_rate_ops in any::<u32>(),
    ) {
        // The trace is the optional tail of the body: an empty result followed by an empty
        // trace must still decode as a trace, and no trace as none. The costs record sits
        // between them, announced by the header, so it is never taken for a trace.
        let mut response = Response::ok(ResponseBody::Invoke {
            result,
            costs: costs.map(|(app_cpu_ns, storage_cpu_ns, bytes_returned, round_trips, attempts, (shipped_data, pushed_back))| InvokeCosts {
                app_cpu_ns,
                storage_cpu_ns,
                bytes_returned,
                round_trips,
                attempts,
                shipped_data,
                pushed_back,
            }),
            trace: trace.map(|(reads, writes)| InvokeTrace { reads, writes }),
        });
        response.admission_rate_ops = admission_rate_ops;
        let mut buf = BytesMut::new();
        response.encode_frame(Opcode::Invoke, ferry_proto::TenantId(3), 9, &mut buf).unwrap();
        let Some(Decoded::Frame(frame)) = FrameDecoder::new().decode(&mut buf).unwrap() else {
            panic!("a whole frame was encoded");
        };
        prop_assert_eq!(Response::decode(&frame.header, frame.body).unwrap(), response);
    }
}

#[test]
fn every_opcode_and_status_parses_from_its_wire_value_and_no_other_does() {
    for opcode in Opcode::ALL {
        assert_eq!(Opcode::from_u8(opcode as u8), Some(opcode));
    }
    let opcodes: Vec<u8> = (0..=u8::MAX)
        .filter(|value| Opcode::from_u8(*value).is_some())
        .collect();
    assert_eq!(opcodes, (1..=11).collect::<Vec<u8>>());
    let statuses: Vec<u8> = (0..=u8::MAX)
        .filter(|value| Status::from_u8(*value).is_some())
        .collect();
    assert_eq!(statuses, (0..=13).collect::<Vec<u8>>());
}

#[test]
fn every_error_status_round_trips_with_its_message() {
    // Every status but ok and pushback (which carry bodies of their own), and each one's
    // wire value parses back to it.
    for status in Status::ALL {
        assert_eq!(Status::from_u8(status as u8), Some(status));
        if matches!(status, Status::Ok | Status::Pushback) {
            continue;
        }
        let response = Response::error(status, format!("because {status}"));
        let mut buf = BytesMut::new();
        response
            .encode_frame(Opcode::Invoke, ferry_proto::TenantId(1), 2, &mut buf)
            .unwrap();
        let Some(Decoded::Frame(frame)) = FrameDecoder::new().decode(&mut buf).unwrap() else {
            panic!("a whole frame was encoded");
        };
        assert_eq!(Response::decode(&frame.header, frame.body).unwrap(), response);
    }
}

#[test]
fn a_count_larger_than_the_limit_is_refused_before_allocating() {
    // A multiget claiming four billion keys in a tiny body.
    let mut body = Vec::new();
    body.extend_from_slice(&1u16.to_le_bytes());
    body.push(b't');
    body.extend_from_slice(&u32::MAX.to_le_bytes());
    let err = Request::decode(Opcode::MultiGet, Bytes::from(body)).unwrap_err();
    assert!(err.to_string().contains("exceeds the limit"), "{err}");
}

#[test]
fn a_costs_flag_on_an_answer_that_cannot_carry_costs_is_refused() {
    // A peer setting the costs flag on anything but a successful invoke answer: the body
    // is not what the flag says, so it is refused as a decode error, never misread.
    let costs = ResponseBody::Invoke {
        result: Bytes::from_static(b"r"),
        costs: Some(InvokeCosts::default()),
        trace: None,
    };
    for (opcode, status) in [(Opcode::Get, Status::Ok), (Opcode::Invoke, Status::Overloaded)] {
        let mut buf = BytesMut::new();
        Response::ok(costs.clone())
            .encode_frame(opcode, ferry_proto::TenantId(1), 2, &mut buf)
            .unwrap();
        buf[5] = status as u8;
        let Some(Decoded::Frame(frame)) = FrameDecoder::new().decode(&mut buf).unwrap() else {
            panic!("a whole frame was encoded");
        };
        assert!(frame.header.carries_costs);
        assert!(matches!(
            Response::decode(&frame.header, frame.body),
            Err(DecodeError::MisplacedCosts(_))
        ));
    }
}
