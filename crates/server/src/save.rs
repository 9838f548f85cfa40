//! SAVE and BGSAVE over RESP: a snapshot of every tenant through the node's checkpointer.
//! BGSAVE starts one and answers at once; SAVE answers when the one it asked for is taken.
//! The node goes on serving meanwhile either way (no fork, no stop).

use ferry_resp::Reply;
use ferry_wal::CheckpointResult;
use tokio::sync::oneshot;

use crate::node::Node;

/// The reply now, or (SAVE) where it will come.
pub(crate) fn save(node: &Node, background: bool) -> Result<Reply, oneshot::Receiver<Reply>> {
    let Some(durable) = &node.durable else {
        return Ok(Reply::err(
            "this node keeps no data on disk: start it with --data-dir to take snapshots",
        ));
    };
    if background {
        return Ok(match durable.checkpointer.request() {
            Ok(()) => Reply::Simple("Background saving started".into()),
            Err(busy) => Reply::err(busy.to_string()),
        });
    }
    let (reply, pending) = oneshot::channel();
    let when_done = Box::new(move |result: CheckpointResult| {
        let _ = reply.send(match result {
            Ok(_) => Reply::ok(),
            Err(why) => Reply::err(format!("the snapshot failed: {why}")),
        });
    });
    match durable.checkpointer.request_then(when_done) {
        Ok(()) => Err(pending),
        Err(busy) => Ok(Reply::err(busy.to_string())),
    }
}
