//! Errors of the client runtime.

use std::time::Duration;

use thiserror::Error;

use ferry_proto::{EncodeError, Response, ResponseBody, Status};

/// Why a client operation failed. Nothing the server sends can make the client panic;
/// anything unexpected becomes [`ClientError::Protocol`].
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ClientError {
    /// The connection could not be established.
    #[error("cannot connect to {addr}: {message}")]
    Connect {
        /// Address tried.
        addr: String,
        /// Why.
        message: String,
    },
    /// The storage node answered with an error status.
    #[error("{status}: {message}")]
    Server {
        /// The status.
        status: Status,
        /// The node's explanation.
        message: String,
    },
    /// The connection broke before the answer arrived.
    #[error("connection to the storage node lost: {0}")]
    Disconnected(String),
    /// No answer within the request timeout.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The connection broke or the answer timed out while a write (put, delete, commit) or a
    /// remote invocation was in flight: it may or may not have been applied (and may still be). Reported
    /// rather than retried, so a write is never applied twice.
    #[error("commit outcome unknown: {0}")]
    CommitOutcomeUnknown(String),
    /// The node sent something that does not follow the protocol.
    #[error("protocol violation by the storage node: {0}")]
    Protocol(String),
    /// The request cannot be encoded (a field too long for the wire format).
    #[error("request cannot be encoded: {0}")]
    Encode(#[from] EncodeError),
    /// The rate limiter refused the request: the policy's rate is fully used.
    #[error("throttled: the admitted rate is {rate_ops} requests/s")]
    Throttled {
        /// The rate in force, requests per second.
        rate_ops: u64,
    },
    /// The request waited for a slot in the policy's window on requests in flight, and its
    /// wait alone would have broken the SLO: refused before it was sent.
    #[error("refused: waited {waited_us} µs for a slot in the window of requests in flight; more would break the SLO")]
    Refused {
        /// How long it had waited since its due time, µs.
        waited_us: u64,
    },
    /// The request was refused by the client itself before sending (e.g. a limit).
    #[error("invalid request: {0}")]
    Invalid(String),
}

impl ClientError {
    /// The protocol status, when the node answered with one.
    pub fn status(&self) -> Option<Status> {
        match self {
            ClientError::Server { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The error for an answer with `status`: `outcome_unknown` (from a gateway or compute
    /// node that lost a forwarded write's answer) is [`ClientError::CommitOutcomeUnknown`],
    /// like a lost answer here.
    pub(crate) fn server(status: Status, message: impl Into<String>) -> ClientError {
        match status {
            Status::OutcomeUnknown => ClientError::CommitOutcomeUnknown(message.into()),
            status => ClientError::Server {
                status,
                message: message.into(),
            },
        }
    }
}

/// Turns an error status into [`ClientError::Server`].
pub(crate) fn check_status(response: Response) -> Result<Response, ClientError> {
    match response.status {
        Status::Ok => Ok(response),
        status => match response.body {
            ResponseBody::Error { message } => Err(ClientError::server(status, message)),
            ResponseBody::Pushback(_) => Err(ClientError::server(status, "invocation pushed back")),
            other => Err(ClientError::Protocol(format!("status {status} with body {other:?}"))),
        },
    }
}

/// An answer of a kind the request does not take.
pub(crate) fn unexpected(response: &Response) -> ClientError {
    ClientError::Protocol(format!("unexpected answer {:?}", response.body))
}
