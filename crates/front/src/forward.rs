//! Answers for requests forwarded to the nodes behind a gateway or compute node: the
//! client runtime's outcomes turned back into protocol responses.

use ferry_client::{ClientError, Invocation};
use ferry_proto::{Response, ResponseBody, Status};

/// The answer for a call that failed behind this process. A lost answer to a write stays
/// "may have been applied" (`outcome_unknown`); a node that could not be reached is
/// `unavailable`; the nodes' own refusals pass through unchanged.
pub fn error_response(err: ClientError) -> Response {
    let message = err.to_string();
    if !matches!(
        err,
        ClientError::Server { .. } | ClientError::Throttled { .. } | ClientError::Refused { .. }
    ) {
        // A node behind this process failed (not a refusal it chose): worth a line.
        tracing::warn!("forwarded request failed: {message}");
    }
    let status = match err {
        ClientError::Server { status, message } => return Response::error(status, message),
        ClientError::CommitOutcomeUnknown(_) => Status::OutcomeUnknown,
        ClientError::Connect { .. }
        | ClientError::Disconnected(_)
        | ClientError::Timeout(_)
        | ClientError::Protocol(_) => Status::Unavailable,
        ClientError::Throttled { .. } | ClientError::Refused { .. } => Status::Overloaded,
        ClientError::Encode(_) => Status::TooLarge,
        ClientError::Invalid(_) => Status::BadRequest,
    };
    Response::error(status, message)
}

/// The answer for a finished invocation: its result, with the CPU it cost both sides in
/// the header's `cpu_ns`, and when the request asked for them (`with_costs`), its costs
/// record: each side's CPU, the round trips and bytes of the requests it made, where it ran.
pub fn invocation_response(invocation: Invocation, with_costs: bool) -> Response {
    let bytes_returned = u32::try_from(invocation.result.len()).unwrap_or(u32::MAX);
    let costs = with_costs.then(|| invocation.costs_record());
    let mut response = Response::ok(ResponseBody::Invoke {
        result: invocation.result,
        costs,
        trace: invocation.trace,
    });
    response.cpu_ns = invocation.cost.app_cpu_ns + invocation.cost.storage_cpu_ns;
    response.bytes_returned = bytes_returned;
    response
}

/// The `bad_request` answer for a request this process does not serve, saying why.
pub(crate) fn not_served(what: &str) -> Response {
    Response::error(Status::BadRequest, what.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_writes_stay_unknown_and_refusals_pass_through() {
        let unknown = error_response(ClientError::CommitOutcomeUnknown("cut".into()));
        assert_eq!(unknown.status, Status::OutcomeUnknown);
        let down = error_response(ClientError::Disconnected("reset".into()));
        assert_eq!(down.status, Status::Unavailable);
        let moved = error_response(ClientError::Server {
            status: Status::CrossSlot,
            message: "spans s1 and s2".into(),
        });
        assert_eq!(moved.status, Status::CrossSlot);
        assert_eq!(
            moved.body,
            ResponseBody::Error {
                message: "spans s1 and s2".into()
            }
        );
        assert_eq!(
            error_response(ClientError::Throttled { rate_ops: 5 }).status,
            Status::Overloaded
        );
    }
}
