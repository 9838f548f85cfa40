//! What is said to a config member on its one listener. A frame is a 4-byte little-endian
//! length, a channel byte and a JSON body: the peer channel carries the Raft group's own
//! messages (their types belong to the glue crate), the client channel carries
//! [`ClientRequest`]s from storage nodes, gateways, clients and admin commands.
//!
//! JSON because configurations are small and rare, and a human reading a capture should
//! see what was decided.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::command::{ConfigChange, Outcome};
use crate::lease::{Grant, Heartbeat, NodeHealth};
use crate::state::{ClusterConfig, Epoch};

/// Largest frame body accepted (a configuration of the largest cluster is well below).
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// Bytes in front of a frame's body.
pub const HEADER_BYTES: usize = 5;

/// Longest a watch waits for a newer configuration before answering with the current one.
pub const MAX_WATCH_WAIT_MS: u64 = 30_000;

/// Which conversation a frame belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    /// Raft messages between config members.
    Peer,
    /// Everyone else.
    Client,
}

impl Channel {
    fn byte(self) -> u8 {
        match self {
            Channel::Peer => 1,
            Channel::Client => 2,
        }
    }
}

/// A frame that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The header's length is 0 or above [`MAX_FRAME_BYTES`].
    #[error("config frame of {0} bytes (at most {MAX_FRAME_BYTES})")]
    Length(usize),
    /// An unknown channel byte.
    #[error("config frame on unknown channel {0}")]
    Channel(u8),
    /// The body is not the JSON expected.
    #[error("config frame: {0}")]
    Body(String),
}

/// A request to a config member.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientRequest {
    /// Answer with the configuration as soon as this member has applied one newer than
    /// `known_epoch`, or after `wait_ms` (at most [`MAX_WATCH_WAIT_MS`]) with whatever it
    /// has. Any member answers; configurations it has applied are committed ones.
    Watch {
        /// The newest epoch the caller has.
        known_epoch: Epoch,
        /// How long to wait for a newer one.
        wait_ms: u64,
    },
    /// Decide a change. Only the leader decides; others answer [`ClientReply::NotLeader`].
    Propose(ConfigChange),
    /// The member's view of the group.
    Status,
    /// A storage node's report; only the leader answers, with a [`ClientReply::Grant`].
    Heartbeat(Heartbeat),
    /// Ask the process `incarnation` of storage node `node` to stop at its next
    /// heartbeat, so whoever runs it starts it again (a rolling restart). Only the leader
    /// takes it, with [`ClientReply::Accepted`].
    Restart {
        /// The node's id.
        node: String,
        /// The incarnation it reported (another process of it is not asked).
        incarnation: u64,
    },
}

/// A config member's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientReply {
    /// A configuration this member has applied.
    Config(ClusterConfig),
    /// What a proposal did once committed.
    Outcome(Outcome),
    /// Ask the leader instead (its config address, when known).
    NotLeader {
        /// `host:port` of the leader, if this member knows one.
        leader: Option<String>,
    },
    /// The member's view of the group.
    Status(GroupStatus),
    /// The answer to a heartbeat.
    Grant(Grant),
    /// The request was taken.
    Accepted,
    /// The request could not be served (the group is shutting down, the disk failed…).
    Failed(String),
}

/// One member's view of the Raft group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupStatus {
    /// This member's id.
    pub id: u64,
    /// The leader it follows, if any.
    pub leader: Option<u64>,
    /// Its current Raft term.
    pub term: u64,
    /// Index of the last log entry it applied.
    pub last_applied: Option<u64>,
    /// The voting members and their addresses.
    pub members: BTreeMap<u64, String>,
    /// The epoch of the configuration it has applied.
    pub epoch: Epoch,
    /// The leader's: what it last heard from each storage node (empty from a follower).
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeHealth>,
}

/// A whole frame: header and JSON body.
pub fn encode<T: Serialize>(channel: Channel, body: &T) -> Vec<u8> {
    let mut out = vec![0; HEADER_BYTES];
    // Serialising plain data structures into a Vec does not fail.
    serde_json::to_writer(&mut out, body).expect("JSON of a plain value");
    let len = (out.len() - HEADER_BYTES) as u32;
    out[..4].copy_from_slice(&len.to_le_bytes());
    out[4] = channel.byte();
    out
}

/// The channel and body length a header announces.
pub fn header(bytes: [u8; HEADER_BYTES]) -> Result<(Channel, usize), WireError> {
    let len = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")) as usize;
    if len == 0 || len > MAX_FRAME_BYTES {
        return Err(WireError::Length(len));
    }
    let channel = match bytes[4] {
        1 => Channel::Peer,
        2 => Channel::Client,
        other => return Err(WireError::Channel(other)),
    };
    Ok((channel, len))
}

/// Parses a frame's body.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, WireError> {
    serde_json::from_slice(body).map_err(|err| WireError::Body(err.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_round_trips_and_bad_headers_are_refused() {
        let request = ClientRequest::Watch {
            known_epoch: 7,
            wait_ms: 100,
        };
        let frame = encode(Channel::Client, &request);
        let (channel, len) = header(frame[..HEADER_BYTES].try_into().unwrap()).unwrap();
        assert_eq!((channel, len), (Channel::Client, frame.len() - HEADER_BYTES));
        assert_eq!(decode::<ClientRequest>(&frame[HEADER_BYTES..]).unwrap(), request);
        assert_eq!(header([0, 0, 0, 0, 2]), Err(WireError::Length(0)));
        assert_eq!(header([0, 0, 0, 2, 2]), Err(WireError::Length(1 << 25)));
        assert_eq!(header([1, 0, 0, 0, 9]), Err(WireError::Channel(9)));
        assert!(decode::<ClientRequest>(b"{\"Watch\":1}").is_err());
    }
}
