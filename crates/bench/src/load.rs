//! Loading data sets into a node with pipelined puts.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use ferry_client::{Client, ClientError};

/// Puts in flight while loading: enough to keep the node busy over one connection.
pub const LOAD_CONCURRENCY: usize = 64;

/// Writes every object into `table`, [`LOAD_CONCURRENCY`] at a time; returns how many.
pub async fn load_dataset(
    client: &Client,
    table: &'static str,
    objects: Vec<(Bytes, Bytes)>,
) -> Result<usize, ClientError> {
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
        worker.await.map_err(|err| ClientError::Invalid(err.to_string()))??;
    }
    Ok(objects.len())
}

/// Loads the social application's graph for `vertices` vertices (four tables) and its
/// `auth` users (one per vertex, scrypt cost `log_n`); returns the objects written.
pub async fn load_social(client: &Client, vertices: u64, log_n: u8, seed: u64) -> Result<usize, ClientError> {
    use ferry_func::builtins::{auth, social};
    let mut by_table: Vec<(&'static str, Vec<(Bytes, Bytes)>)> = Vec::new();
    for (table, key, value) in social::dataset(vertices, seed) {
        match by_table.iter_mut().find(|(t, _)| *t == table) {
            Some((_, rows)) => rows.push((key, value)),
            None => by_table.push((table, vec![(key, value)])),
        }
    }
    let users: Vec<(Bytes, Bytes)> = auth::dataset(vertices, log_n, seed)
        .collect::<Result<_, _>>()
        .map_err(|err| ClientError::Invalid(err.to_string()))?;
    by_table.push((auth::TABLE, users));
    let mut written = 0;
    for (table, rows) in by_table {
        written += load_dataset(client, table, rows).await?;
    }
    Ok(written)
}
