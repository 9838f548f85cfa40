//! Writing data sets into a node with pipelined puts.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use ferry_client::{Client, ClientError};

use crate::DatasetError;

/// Puts in flight while loading: enough to keep the node busy over one connection.
pub const LOAD_CONCURRENCY: usize = 64;

/// The rows of one table of a data set, ready to be written.
#[derive(Clone, Debug)]
pub struct Table {
    /// The table the rows go to.
    pub name: &'static str,
    /// Keys and values.
    pub rows: Vec<(Bytes, Bytes)>,
}

/// Writes every object into `table`, [`LOAD_CONCURRENCY`] at a time; returns how many.
pub async fn load_dataset(
    client: &Client,
    table: &'static str,
    objects: Vec<(Bytes, Bytes)>,
) -> Result<usize, DatasetError> {
    let objects = Arc::new(objects);
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..LOAD_CONCURRENCY)
        .map(|_| {
            let client = client.clone();
            let objects = Arc::clone(&objects);
            let next = Arc::clone(&next);
            tokio::spawn(async move {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some((key, value)) = objects.get(index) else {
                        return Ok::<(), ClientError>(());
                    };
                    client.put(table, key, value).await?;
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.map_err(|err| DatasetError::Loader(err.to_string()))??;
    }
    Ok(objects.len())
}

/// Writes every table in turn (see [`load_dataset`]); returns the objects written.
pub async fn load_tables(client: &Client, tables: Vec<Table>) -> Result<usize, DatasetError> {
    let mut written = 0;
    for table in tables {
        written += load_dataset(client, table.name, table.rows).await?;
    }
    Ok(written)
}
