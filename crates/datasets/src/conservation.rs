//! YCSB-T's invariant, checked on the loaded accounts after a run.

use bytes::Bytes;

use ferry_client::Client;
use ferry_func::builtins::ycsbt;

use crate::DatasetError;

/// Balances summed per multiget when checking the closed economy.
const BALANCE_CHUNK: u64 = ferry_proto::MAX_MULTIGET_KEYS as u64;

/// Bytes of the balance at the head of an account's value.
const BALANCE_BYTES: usize = 8;

/// YCSB-T's invariant: transfers move units, never create or destroy them, so the total of
/// all `accounts` balances is what the data set started with.
pub async fn ycsbt_total_is_conserved(client: &Client, accounts: u64) -> Result<bool, DatasetError> {
    let mut total = 0u64;
    let mut first = 0;
    while first < accounts {
        let last = (first + BALANCE_CHUNK).min(accounts);
        let keys: Vec<Bytes> = (first..last)
            .map(|a| Bytes::copy_from_slice(&a.to_le_bytes()))
            .collect();
        for object in client.multiget(ycsbt::TABLE, &keys).await? {
            let value = object
                .ok_or_else(|| DatasetError::Damaged("an account vanished".into()))?
                .value;
            let balance = value
                .get(..BALANCE_BYTES)
                .map(|head| u64::from_le_bytes(head.try_into().expect("8 bytes")))
                .ok_or_else(|| DatasetError::Damaged("an account value is shorter than 8 bytes".into()))?;
            total += balance;
        }
        first = last;
    }
    Ok(total == accounts * ycsbt::INITIAL_BALANCE)
}
