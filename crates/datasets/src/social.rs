//! The social application's data set: its graph's four tables and one `auth` user per
//! vertex (the application's log-in step checks them).

use bytes::Bytes;

use ferry_client::Client;
use ferry_func::builtins::{auth, social};

use crate::load::{load_tables, Table};
use crate::DatasetError;

/// The social graph for `vertices` vertices, table by table, and its `auth` users (one per
/// vertex, scrypt cost `log_n`).
pub fn social_tables(vertices: u64, log_n: u8, seed: u64) -> Result<Vec<Table>, DatasetError> {
    let mut tables: Vec<Table> = Vec::new();
    for (name, key, value) in social::dataset(vertices, seed) {
        match tables.iter_mut().find(|table| table.name == name) {
            Some(table) => table.rows.push((key, value)),
            None => tables.push(Table {
                name,
                rows: vec![(key, value)],
            }),
        }
    }
    let users: Vec<(Bytes, Bytes)> = auth::dataset(vertices, log_n, seed).collect::<Result<_, _>>()?;
    tables.push(Table {
        name: auth::TABLE,
        rows: users,
    });
    Ok(tables)
}

/// Loads the social application's graph and users (see [`social_tables`]); returns the
/// objects written.
pub async fn load_social(client: &Client, vertices: u64, log_n: u8, seed: u64) -> Result<usize, DatasetError> {
    load_tables(client, social_tables(vertices, log_n, seed)?).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_social_data_set_has_the_graphs_tables_and_one_user_per_vertex() {
        let vertices = 3;
        let tables = social_tables(vertices, 1, 7).unwrap();
        let users = tables.iter().find(|table| table.name == auth::TABLE).unwrap();
        assert_eq!(users.rows.len() as u64, vertices);
        assert_eq!(tables.len(), 5, "four graph tables and the users");
        let names: std::collections::BTreeSet<&str> = tables.iter().map(|table| table.name).collect();
        assert_eq!(names.len(), tables.len(), "rows of one table are kept together");
    }
}
