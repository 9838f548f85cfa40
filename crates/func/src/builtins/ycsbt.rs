//! `ycsbt`: the YCSB-T transaction — read one account, or transfer units between two.
//!
//! Table [`TABLE`] maps an 8-byte little-endian account id to a value whose first 8 bytes
//! are the balance. A transfer is a read-modify-write of two objects, so it is only correct
//! because invocations are serializable: the total of all balances never changes.

use bytes::{BufMut, Bytes, BytesMut};

use super::check_compute;
use crate::args::{padded_value, reader, value_u64};
use crate::ctx::Ctx;
use crate::registry::{FnError, FnFuture};
use crate::work::spin_ns;

/// Registered name.
pub const NAME: &str = "ycsbt";

/// Table the accounts live in.
pub const TABLE: &str = "accounts";

/// Balance every account starts with in the data set.
pub const INITIAL_BALANCE: u64 = 1000;

const OP_READ: u8 = 0;
const OP_TRANSFER: u8 = 1;

/// Outcome byte: the transfer was applied.
pub const TRANSFER_APPLIED: u8 = 1;
/// Outcome byte: the source balance was too low; nothing was written.
pub const TRANSFER_INSUFFICIENT: u8 = 0;

/// One YCSB-T request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum YcsbtArgs {
    /// Read one account's balance.
    Read {
        /// Account id.
        account: u64,
        /// Emulated work inside the transaction, in nanoseconds.
        compute_ns: u64,
    },
    /// Move `amount` from one account to another.
    Transfer {
        /// Debited account.
        from: u64,
        /// Credited account.
        to: u64,
        /// Units moved.
        amount: u64,
        /// Emulated work inside the transaction, in nanoseconds.
        compute_ns: u64,
    },
}

impl YcsbtArgs {
    /// Wire form: op u8, then the fields in declaration order as little-endian u64.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(33);
        match *self {
            YcsbtArgs::Read { account, compute_ns } => {
                out.put_u8(OP_READ);
                out.put_u64_le(account);
                out.put_u64_le(compute_ns);
            }
            YcsbtArgs::Transfer {
                from,
                to,
                amount,
                compute_ns,
            } => {
                out.put_u8(OP_TRANSFER);
                out.put_u64_le(from);
                out.put_u64_le(to);
                out.put_u64_le(amount);
                out.put_u64_le(compute_ns);
            }
        }
        out.freeze()
    }

    /// Parses and checks the wire form.
    pub fn decode(args: &Bytes) -> Result<YcsbtArgs, FnError> {
        let mut r = reader(args);
        let parsed = match r.u8("op")? {
            OP_READ => YcsbtArgs::Read {
                account: r.u64("account")?,
                compute_ns: r.u64("compute_ns")?,
            },
            OP_TRANSFER => YcsbtArgs::Transfer {
                from: r.u64("from")?,
                to: r.u64("to")?,
                amount: r.u64("amount")?,
                compute_ns: r.u64("compute_ns")?,
            },
            op => return Err(FnError::BadArgs(format!("unknown ycsbt op {op}"))),
        };
        r.finish()?;
        let (YcsbtArgs::Read { compute_ns, .. } | YcsbtArgs::Transfer { compute_ns, .. }) = parsed;
        check_compute(compute_ns)?;
        Ok(parsed)
    }
}

async fn balance(ctx: &mut dyn Ctx, account: u64) -> Result<(u64, Bytes), FnError> {
    let value = ctx
        .get(TABLE, &account.to_le_bytes())
        .await?
        .ok_or_else(|| FnError::Failed(format!("no such account {account}")))?;
    Ok((value_u64(&value, "account")?, value))
}

/// Replaces the balance at the head of a stored value, keeping its padding.
fn with_balance(value: &Bytes, balance: u64) -> Bytes {
    let mut out = BytesMut::from(&value[..]);
    out[..8].copy_from_slice(&balance.to_le_bytes());
    out.freeze()
}

/// Routing key: the account read, or the debited account of a transfer.
pub fn route(args: &Bytes) -> Option<Bytes> {
    let account = match YcsbtArgs::decode(args).ok()? {
        YcsbtArgs::Read { account, .. } => account,
        YcsbtArgs::Transfer { from, .. } => from,
    };
    Some(Bytes::copy_from_slice(&account.to_le_bytes()))
}

/// Read: returns the balance (8 bytes). Transfer: returns the outcome byte and both
/// balances afterwards (17 bytes).
pub fn run(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        match YcsbtArgs::decode(ctx.args())? {
            YcsbtArgs::Read { account, compute_ns } => {
                let (balance, _) = balance(ctx, account).await?;
                spin_ns(compute_ns);
                Ok(Bytes::copy_from_slice(&balance.to_le_bytes()))
            }
            YcsbtArgs::Transfer {
                from,
                to,
                amount,
                compute_ns,
            } => {
                let (from_balance, from_value) = balance(ctx, from).await?;
                let (to_balance, to_value) = balance(ctx, to).await?;
                spin_ns(compute_ns);
                let mut out = BytesMut::with_capacity(17);
                if from == to || from_balance < amount {
                    out.put_u8(if from == to {
                        TRANSFER_APPLIED
                    } else {
                        TRANSFER_INSUFFICIENT
                    });
                    out.put_u64_le(from_balance);
                    out.put_u64_le(to_balance);
                    return Ok(out.freeze());
                }
                let to_after = to_balance
                    .checked_add(amount)
                    .ok_or_else(|| FnError::Failed(format!("balance of account {to} would overflow")))?;
                let from_after = from_balance - amount;
                ctx.put(TABLE, &from.to_le_bytes(), with_balance(&from_value, from_after))
                    .await?;
                ctx.put(TABLE, &to.to_le_bytes(), with_balance(&to_value, to_after))
                    .await?;
                out.put_u8(TRANSFER_APPLIED);
                out.put_u64_le(from_after);
                out.put_u64_le(to_after);
                Ok(out.freeze())
            }
        }
    })
}

/// The data set: `accounts` accounts of [`INITIAL_BALANCE`], values `value_bytes` long.
pub fn dataset(accounts: u64, value_bytes: usize, seed: u64) -> impl Iterator<Item = (Bytes, Bytes)> {
    (0..accounts).map(move |id| {
        (
            Bytes::copy_from_slice(&id.to_le_bytes()),
            padded_value(INITIAL_BALANCE, value_bytes, seed.wrapping_add(id)),
        )
    })
}
