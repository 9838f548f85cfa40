//! `auth`: verify a password against a stored salted scrypt hash (PHC string format).
//!
//! Compute-heavy and data-light: one get, then a memory-hard hash. The stored hash carries
//! its own scrypt parameters, which are checked against [`MAX_LOG_N`] and friends before
//! hashing so a tenant cannot make the storage node allocate gigabytes.

use bytes::{BufMut, Bytes, BytesMut};
use scrypt::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use scrypt::{Params, Scrypt};

use crate::args::{mix64, reader};
use crate::ctx::Ctx;
use crate::registry::{FnError, FnFuture};

/// Registered name.
pub const NAME: &str = "auth";

/// Table of users: username → PHC hash string.
pub const TABLE: &str = "users";

/// Largest scrypt cost accepted (2^16 blocks; with r = 8 that is 64 MiB of memory).
pub const MAX_LOG_N: u8 = 16;
/// Largest scrypt block size accepted.
pub const MAX_R: u32 = 8;
/// Largest scrypt parallelism accepted.
pub const MAX_P: u32 = 1;

/// Default cost of the data set: cheap enough to load thousands of users in seconds and to
/// serve as a microsecond-scale (≈ 100 µs) compute-heavy function.
pub const DEFAULT_LOG_N: u8 = 6;

/// Longest username or password accepted.
const MAX_FIELD_BYTES: usize = 256;

/// Outcome byte: password matches.
pub const AUTH_OK: u8 = 1;
/// Outcome byte: unknown user or wrong password (not distinguished, to not reveal users).
pub const AUTH_DENIED: u8 = 0;

/// Arguments of one check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthArgs {
    /// Username (the key in [`TABLE`]).
    pub user: Bytes,
    /// Password to check.
    pub password: Bytes,
}

impl AuthArgs {
    /// Wire form: user and password, each u16-length-prefixed.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(4 + self.user.len() + self.password.len());
        out.put_u16_le(self.user.len() as u16);
        out.put_slice(&self.user);
        out.put_u16_le(self.password.len() as u16);
        out.put_slice(&self.password);
        out.freeze()
    }

    /// Parses and checks the wire form.
    pub fn decode(args: &Bytes) -> Result<AuthArgs, FnError> {
        let mut r = reader(args);
        let parsed = AuthArgs {
            user: r.bytes16("user")?,
            password: r.bytes16("password")?,
        };
        r.finish()?;
        if parsed.user.len() > MAX_FIELD_BYTES || parsed.password.len() > MAX_FIELD_BYTES {
            return Err(FnError::BadArgs(format!(
                "user and password are limited to {MAX_FIELD_BYTES} bytes"
            )));
        }
        Ok(parsed)
    }
}

/// Hashes `password` into a PHC string with the given cost and a salt derived from `salt_seed`.
pub fn hash_password(password: &[u8], log_n: u8, salt_seed: u64) -> Result<String, FnError> {
    let params = Params::new(log_n, MAX_R, MAX_P, Params::RECOMMENDED_LEN)
        .map_err(|err| FnError::BadArgs(format!("scrypt parameters: {err}")))?;
    let mut salt_bytes = [0u8; 16];
    salt_bytes[..8].copy_from_slice(&mix64(salt_seed).to_le_bytes());
    salt_bytes[8..].copy_from_slice(&mix64(!salt_seed).to_le_bytes());
    let salt = SaltString::encode_b64(&salt_bytes).map_err(|err| FnError::Failed(err.to_string()))?;
    let hash = Scrypt
        .hash_password_customized(password, None, None, params, &salt)
        .map_err(|err| FnError::Failed(err.to_string()))?;
    Ok(hash.to_string())
}

fn verify(stored: &[u8], password: &[u8]) -> Result<bool, FnError> {
    let stored = std::str::from_utf8(stored).map_err(|_| FnError::Failed("stored hash is not UTF-8".into()))?;
    let hash = PasswordHash::new(stored).map_err(|err| FnError::Failed(format!("stored hash: {err}")))?;
    let params = Params::try_from(&hash).map_err(|err| FnError::Failed(format!("stored hash: {err}")))?;
    if params.log_n() > MAX_LOG_N || params.r() > MAX_R || params.p() > MAX_P {
        return Err(FnError::Failed(format!(
            "stored hash asks for scrypt log_n={} r={} p={}, above the limits {MAX_LOG_N}/{MAX_R}/{MAX_P}",
            params.log_n(),
            params.r(),
            params.p()
        )));
    }
    Ok(Scrypt.verify_password(password, &hash).is_ok())
}

/// Routing key: the user's key.
pub fn route(args: &Bytes) -> Option<Bytes> {
    AuthArgs::decode(args).ok().map(|args| args.user)
}

/// Result: one outcome byte, [`AUTH_OK`] or [`AUTH_DENIED`].
pub fn run(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        let args = AuthArgs::decode(ctx.args())?;
        let outcome = match ctx.get(TABLE, &args.user).await? {
            Some(stored) if verify(&stored, &args.password)? => AUTH_OK,
            _ => AUTH_DENIED,
        };
        Ok(Bytes::copy_from_slice(&[outcome]))
    })
}

/// Username of user `i` in the data set.
pub fn username(i: u64) -> Bytes {
    Bytes::from(format!("user{i}"))
}

/// Password of user `i` in the data set.
pub fn password(i: u64) -> Bytes {
    Bytes::from(format!("password-{i}"))
}

/// The data set: `users` users with their hashed passwords at cost `log_n`.
pub fn dataset(users: u64, log_n: u8, seed: u64) -> impl Iterator<Item = Result<(Bytes, Bytes), FnError>> {
    (0..users).map(move |i| {
        let hash = hash_password(&password(i), log_n, seed ^ i)?;
        Ok((username(i), Bytes::from(hash)))
    })
}
