//! A library's text in the Redis Functions format: the `#!lua name=LIB` first line, then
//! Lua that calls `redis.register_function` for each function it defines.

use sha2::{Digest, Sha256};

use crate::LuaError;

/// Longest library accepted (it is stored as one object and sent in one request).
pub const MAX_LIBRARY_BYTES: usize = 512 * 1024;

/// Longest library or function name.
pub const MAX_NAME_BYTES: usize = 64;

/// Most functions one library may register.
pub const MAX_FUNCTIONS_PER_LIBRARY: usize = 256;

/// The function flags Redis defines (any case); only `no-writes` changes what ferry does,
/// the others are accepted (and listed) so that libraries written for Redis load unchanged.
pub const KNOWN_FLAGS: &[&str] = &[
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

/// A library's metadata, read from its first line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The library's name.
    pub name: String,
}

/// One function a library registers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionInfo {
    /// Its name.
    pub name: String,
    /// Its flags, lower case, each once (`no-writes`: it may run under FCALL_RO and may
    /// not write).
    pub flags: Vec<String>,
    /// Its description, if it gave one.
    pub description: Option<String>,
}

impl FunctionInfo {
    /// Flagged `no-writes`.
    pub fn no_writes(&self) -> bool {
        self.flags.iter().any(|flag| flag == "no-writes")
    }
}

/// Whether `name` is a valid library or function name (Redis's rule).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME_BYTES && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Parses the first line, and returns the code Lua compiles: the same text with that line
/// blanked (so line numbers in errors stay right).
pub fn parse_header(code: &str) -> Result<(Header, String), LuaError> {
    if code.len() > MAX_LIBRARY_BYTES {
        return Err(LuaError::library(format!(
            "library of {} bytes exceeds the limit of {MAX_LIBRARY_BYTES}",
            code.len()
        )));
    }
    let (first, rest) = code.split_once('\n').unwrap_or((code, ""));
    let first = first.trim_end_matches('\r');
    if !first.starts_with("#!") {
        return Err(LuaError::library("Missing library metadata"));
    }
    // As Redis reads it: the first word is `#!` and the engine (`#! name=x` names the
    // engine ''), then `name=` (any case, once; a value may be double-quoted).
    let mut words = first.split_ascii_whitespace();
    let engine = words.next().unwrap_or("#!").trim_start_matches("#!");
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(LuaError::library(format!("Engine '{engine}' not found")));
    }
    let mut name = None;
    for word in words {
        let value = word
            .get(..5)
            .filter(|prefix| prefix.eq_ignore_ascii_case("name="))
            .map(|_| &word[5..]);
        match value {
            Some(_) if name.is_some() => {
                return Err(LuaError::library(
                    "Invalid metadata value, name argument was given multiple times",
                ))
            }
            Some(value) => {
                let unquoted = value
                    .strip_prefix('"')
                    .and_then(|inner| inner.strip_suffix('"'))
                    .unwrap_or(value);
                name = Some(unquoted.to_string());
            }
            None => return Err(LuaError::library(format!("Invalid metadata value given: {word}"))),
        }
    }
    let name = name.ok_or_else(|| LuaError::library("Library name was not given"))?;
    if !valid_name(&name) {
        return Err(LuaError::library(
            "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long",
        ));
    }
    Ok((Header { name }, format!("\n{rest}")))
}

/// The library's identity for caches: SHA-256 of its text, in hex. A different text is a
/// different library even under the same name.
pub fn hash(code: &[u8]) -> String {
    Sha256::digest(code).iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_parse_and_bad_ones_get_redis_errors() {
        let (header, body) = parse_header("#!lua name=mylib\nreturn 1").unwrap();
        assert_eq!(header.name, "mylib");
        assert_eq!(body, "\nreturn 1");
        assert!(parse_header("#!LUA name=x").is_ok());
        let message = |code: &str| parse_header(code).unwrap_err().to_string();
        assert_eq!(message("return 1"), "ERR Missing library metadata");
        assert_eq!(message("#!python name=x\n"), "ERR Engine 'python' not found");
        assert_eq!(message("#! name=x\n"), "ERR Engine '' not found");
        assert_eq!(
            message("#!lua name=a NAME=b\n"),
            "ERR Invalid metadata value, name argument was given multiple times"
        );
        assert_eq!(parse_header("#!lua name=\"quoted\"\n").unwrap().0.name, "quoted");
        assert_eq!(message("#!lua\n"), "ERR Library name was not given");
        assert_eq!(
            message("#!lua name=x other=y\n"),
            "ERR Invalid metadata value given: other=y"
        );
        assert!(message("#!lua name=bad-name\n").contains("Library names can only contain"));
        let huge = format!("#!lua name=x\n--{}", "x".repeat(MAX_LIBRARY_BYTES));
        assert!(message(&huge).contains("exceeds the limit"));
    }

    #[test]
    fn hashes_tell_texts_apart() {
        assert_eq!(hash(b"a").len(), 64);
        assert_eq!(hash(b"a"), hash(b"a"));
        assert_ne!(hash(b"a"), hash(b"b"));
    }
}
