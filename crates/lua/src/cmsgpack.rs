//! The `cmsgpack` library Redis preloads for scripts (lua-cmsgpack 0.4.0, Redis's
//! `deps/lua/src/lua_cmsgpack.c`), written here rather than over a MessagePack crate:
//! the job is lua-cmsgpack's rules (what is an array, when a float is a float32, what
//! nests too deep), and MessagePack's formats are a short table of tags. The rules:
//!
//! - `pack(...)` packs each argument and concatenates them; `unpack(s)` returns every value
//!   in `s`; `unpack_one(s [, offset])` and `unpack_limit(s, limit [, offset])` return the
//!   next byte offset (-1 once `s` is used up) and then the values.
//! - A table whose keys are exactly 1..n is an array (the empty table too), any other a
//!   map; a table nested [`MAX_NESTING`] deep packs as nil (so a table holding itself
//!   packs, as a tree 16 deep).
//! - A number with an integral value that fits 64 bits packs as the smallest integer
//!   format; any other as a float32 when that is lossless, else a float64.
//! - Strings pack as MessagePack str (fixstr, str8, str16, str32); nil, functions and
//!   other values as nil.
//! - Unpacking also reads bin8/16/32 (as strings; Redis refuses them), a uint64 past
//!   `i64::MAX` as a float (Redis wraps it negative), and follows at most
//!   [`MAX_UNPACK_NESTING`] levels.
//!
//! Malformed input raises `Missing bytes in input.` or `Bad data format in input.`. The
//! work is bounded: output by [`clib::MAX_OUTPUT_BYTES`], values returned by
//! [`clib::MAX_RESULTS`], time by the call's instruction budget, which every value packed
//! or unpacked is charged to.

use std::collections::HashMap;
use std::ops::Range;

use mlua::{Lua, MultiValue, Table, Value};

use crate::clib::{self, bad_argument, check_integer, check_string, opt_integer, raised, LibError, Meter};

/// Tables nested deeper than this pack as nil: lua-cmsgpack's `LUACMSGPACK_MAX_NESTING`,
/// which is what lets a table that holds itself pack at all.
pub const MAX_NESTING: usize = 16;

/// Deepest nesting `unpack` follows: above what `pack` makes ([`MAX_NESTING`]) with room
/// for other encoders' data, and a bound on the decoder's recursion for hostile input.
pub const MAX_UNPACK_NESTING: usize = 128;

/// Redis's error when more values would be returned than a C function may.
const TOO_MANY_VALUES: &str =
    "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)";

/// The `cmsgpack` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let cmsgpack = clib::library(
        lua,
        &[
            ("pack", pack),
            ("unpack", unpack),
            ("unpack_one", unpack_one),
            ("unpack_limit", unpack_limit),
        ],
    )?;
    cmsgpack.raw_set("_NAME", "cmsgpack")?;
    cmsgpack.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    cmsgpack.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    cmsgpack.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(cmsgpack)
}

fn pack(lua: &Lua, args: MultiValue) -> Result<MultiValue, LibError> {
    if args.is_empty() {
        return Err(bad_argument(0, "pack", "MessagePack pack needs input."));
    }
    let mut packer = Packer {
        out: Vec::new(),
        packed: HashMap::new(),
        meter: Meter::new(lua),
    };
    for value in args.iter() {
        packer.value(value, 0)?;
    }
    packer.meter.flush()?;
    let packed = Value::String(lua.create_string(&packer.out)?);
    Ok(MultiValue::from_vec(vec![packed]))
}

fn unpack(lua: &Lua, args: MultiValue) -> Result<MultiValue, LibError> {
    unpack_full(lua, &args, "unpack", 0, 0)
}

fn unpack_one(lua: &Lua, args: MultiValue) -> Result<MultiValue, LibError> {
    let offset = opt_integer(lua, &args, 2, "unpack_one", 0)?;
    unpack_full(lua, &args, "unpack_one", 1, offset)
}

fn unpack_limit(lua: &Lua, args: MultiValue) -> Result<MultiValue, LibError> {
    let limit = check_integer(lua, &args, 2, "unpack_limit")?;
    let offset = opt_integer(lua, &args, 3, "unpack_limit", 0)?;
    unpack_full(lua, &args, "unpack_limit", limit, offset)
}

/// Lua-cmsgpack's `mp_unpack_full`: with neither a limit nor an offset (`unpack`, and
/// `unpack_limit(s, 0)` too) every value and no offset; otherwise the next offset first.
fn unpack_full(lua: &Lua, args: &MultiValue, function: &str, limit: i64, offset: i64) -> Result<MultiValue, LibError> {
    let text = check_string(lua, args, 1, function)?;
    let data = text.as_bytes();
    if offset < 0 || limit < 0 {
        return Err(raised(format!(
            "Invalid request to unpack with offset of {offset} and limit of {limit}."
        )));
    }
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    if start > data.len() {
        return Err(raised(format!(
            "Start offset {offset} greater than input length {}.",
            data.len()
        )));
    }
    let all = limit == 0 && offset == 0;
    let limit = if all {
        usize::MAX
    } else {
        usize::try_from(limit).unwrap_or(usize::MAX)
    };
    let mut cursor = Cursor {
        data: &data,
        at: start,
        meter: Meter::new(lua),
    };
    let mut values = Vec::new();
    while cursor.at < data.len() && values.len() < limit {
        if values.len() >= clib::MAX_RESULTS {
            return Err(raised(TOO_MANY_VALUES));
        }
        values.push(cursor.value(lua, 0)?);
    }
    cursor.meter.flush()?;
    if !all {
        let next = if cursor.at == data.len() { -1 } else { cursor.at as i64 };
        values.insert(0, Value::Integer(next));
    }
    Ok(MultiValue::from_vec(values))
}

/// The bytes packed so far, bounded by [`clib::MAX_OUTPUT_BYTES`].
struct Packer<'a> {
    /// The packed bytes.
    out: Vec<u8>,
    /// Where each table was packed, by its address and level: a table met again at a
    /// level (one holding itself, or shared) is copied, not walked again, so a table
    /// holding itself costs its 16 levels, not the tree of them it unfolds to.
    packed: HashMap<(usize, usize), Range<usize>>,
    /// The work done, charged to the call's budget.
    meter: Meter<'a>,
}

impl Packer<'_> {
    fn room(&self, more: usize) -> Result<(), LibError> {
        if self.out.len() + more > clib::MAX_OUTPUT_BYTES {
            return Err(raised(format!(
                "MessagePack pack output larger than {} bytes",
                clib::MAX_OUTPUT_BYTES
            )));
        }
        Ok(())
    }

    fn push(&mut self, bytes: &[u8]) -> Result<(), LibError> {
        self.room(bytes.len())?;
        self.out.extend_from_slice(bytes);
        Ok(())
    }

    /// `mp_encode_lua_type`: one value at nesting `level` (0 for an argument).
    fn value(&mut self, value: &Value, level: usize) -> Result<(), LibError> {
        self.meter.add(cost(value))?;
        match value {
            Value::String(text) => self.string(&text.as_bytes()),
            Value::Boolean(b) => self.push(&[if *b { 0xc3 } else { 0xc2 }]),
            Value::Integer(n) => self.integer(*n),
            Value::Number(n) => self.number(*n),
            Value::Table(table) if level < MAX_NESTING => self.table(table, level),
            _ => self.push(&[0xc0]),
        }
    }

    fn string(&mut self, bytes: &[u8]) -> Result<(), LibError> {
        let len = bytes.len();
        if len < 32 {
            self.push(&[0xa0 | len as u8])?;
        } else if len <= 0xff {
            self.push(&[0xd9, len as u8])?;
        } else if len <= 0xffff {
            self.push(&[0xda])?;
            self.push(&(len as u16).to_be_bytes())?;
        } else {
            let len = u32::try_from(len).map_err(|_| raised("MessagePack string too long"))?;
            self.push(&[0xdb])?;
            self.push(&len.to_be_bytes())?;
        }
        self.push(bytes)
    }

    /// A float with an integral value that fits packs as an integer (lua-cmsgpack's
    /// `IS_INT64_EQUIVALENT`, what Redis's Lua 5.1, with only doubles, relies on).
    fn number(&mut self, n: f64) -> Result<(), LibError> {
        const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
        if n.trunc() == n && (-TWO_POW_63..TWO_POW_63).contains(&n) {
            return self.integer(n as i64);
        }
        let single = n as f32;
        if f64::from(single) == n {
            self.push(&[0xca])?;
            self.push(&single.to_be_bytes())
        } else {
            self.push(&[0xcb])?;
            self.push(&n.to_be_bytes())
        }
    }

    fn integer(&mut self, n: i64) -> Result<(), LibError> {
        match n {
            0..=127 => self.push(&[n as u8]),
            128..=0xff => self.push(&[0xcc, n as u8]),
            0x100..=0xffff => {
                self.push(&[0xcd])?;
                self.push(&(n as u16).to_be_bytes())
            }
            0x1_0000..=0xffff_ffff => {
                self.push(&[0xce])?;
                self.push(&(n as u32).to_be_bytes())
            }
            0x1_0000_0000.. => {
                self.push(&[0xcf])?;
                self.push(&(n as u64).to_be_bytes())
            }
            -32..=-1 => self.push(&[n as u8]),
            -128..=-33 => self.push(&[0xd0, n as u8]),
            -32768..=-129 => {
                self.push(&[0xd1])?;
                self.push(&(n as i16).to_be_bytes())
            }
            -2_147_483_648..=-32769 => {
                self.push(&[0xd2])?;
                self.push(&(n as i32).to_be_bytes())
            }
            _ => {
                self.push(&[0xd3])?;
                self.push(&n.to_be_bytes())
            }
        }
    }

    /// A table: copied if packed before at this level, else walked.
    fn table(&mut self, table: &Table, level: usize) -> Result<(), LibError> {
        // No Lua code runs while packing: a table met again is as it was.
        let seen = (table.to_pointer() as usize, level);
        if let Some(range) = self.packed.get(&seen).cloned() {
            self.room(range.len())?;
            self.out.extend_from_within(range);
            return Ok(());
        }
        let start = self.out.len();
        self.walk(table, level)?;
        self.packed.insert(seen, start..self.out.len());
        Ok(())
    }

    /// Two passes, as lua-cmsgpack makes: count the keys (and see whether they are 1..n),
    /// then pack them.
    fn walk(&mut self, table: &Table, level: usize) -> Result<(), LibError> {
        let (mut count, mut largest, mut array) = (0usize, 0i64, true);
        table.for_each(|key: Value, _: Value| {
            count += 1;
            match key {
                Value::Integer(i) if i > 0 => largest = largest.max(i),
                _ => array = false,
            }
            Ok(())
        })?;
        array &= usize::try_from(largest).is_ok_and(|largest| largest == count);
        let (fixed, wide) = if array { (0x90, 0xdc) } else { (0x80, 0xde) };
        self.header(count, fixed, wide)?;
        let mut packed = 0;
        if array {
            // Keys exactly 1..count: the sequence, in order.
            for value in table.sequence_values::<Value>() {
                self.value(&value?, level + 1)?;
                packed += 1;
            }
        } else {
            let mut failure = None;
            let walked = table.for_each(|key: Value, value: Value| {
                packed += 1;
                let pair = self.value(&key, level + 1).and_then(|()| self.value(&value, level + 1));
                pair.map_err(|err| {
                    failure = Some(err);
                    mlua::Error::runtime("cmsgpack: packing stopped")
                })
            });
            if let Some(failure) = failure {
                return Err(failure);
            }
            walked?;
        }
        // A weak table may lose entries between the passes: never a header that lies.
        if packed != count {
            return Err(raised("MessagePack pack: table changed while packing"));
        }
        Ok(())
    }

    /// An array's or map's header: `fixed | n`, or the 16- or 32-bit form (`wide`, `wide + 1`).
    fn header(&mut self, n: usize, fixed: u8, wide: u8) -> Result<(), LibError> {
        if n <= 15 {
            self.push(&[fixed | n as u8])
        } else if n <= 0xffff {
            self.push(&[wide])?;
            self.push(&(n as u16).to_be_bytes())
        } else {
            let n = u32::try_from(n).map_err(|_| raised("MessagePack table too large"))?;
            self.push(&[wide + 1])?;
            self.push(&n.to_be_bytes())
        }
    }
}

/// What a value packed or unpacked costs the call's budget.
fn cost(value: &Value) -> i64 {
    match value {
        Value::String(_) => clib::STRING_COST_INSTRUCTIONS,
        _ => clib::VALUE_COST_INSTRUCTIONS,
    }
}

/// Reading position in the packed bytes; every read is bounds-checked.
struct Cursor<'a> {
    /// The packed bytes.
    data: &'a [u8],
    /// The next byte's offset.
    at: usize,
    /// The work done, charged to the call's budget.
    meter: Meter<'a>,
}

fn missing() -> LibError {
    raised("Missing bytes in input.")
}

fn bad_format() -> LibError {
    raised("Bad data format in input.")
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], LibError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.data.len())
            .ok_or_else(missing)?;
        let bytes = &self.data[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], LibError> {
        let mut bytes = [0; N];
        bytes.copy_from_slice(self.take(N)?);
        Ok(bytes)
    }

    /// A big-endian length of `width` bytes (1, 2 or 4).
    fn length(&mut self, width: usize) -> Result<usize, LibError> {
        Ok(self
            .take(width)?
            .iter()
            .fold(0, |n, &byte| (n << 8) | usize::from(byte)))
    }

    /// `mp_decode_to_lua_type`: one value, `depth` containers down.
    fn value(&mut self, lua: &Lua, depth: usize) -> Result<Value, LibError> {
        let [tag] = self.array::<1>()?;
        let value = self.decode(lua, tag, depth)?;
        self.meter.add(cost(&value))?;
        Ok(value)
    }

    fn decode(&mut self, lua: &Lua, tag: u8, depth: usize) -> Result<Value, LibError> {
        Ok(match tag {
            0x00..=0x7f => Value::Integer(i64::from(tag)),
            0xe0..=0xff => Value::Integer(i64::from(tag as i8)),
            0xc0 => Value::Nil,
            0xc2 => Value::Boolean(false),
            0xc3 => Value::Boolean(true),
            0xcc => Value::Integer(i64::from(self.array::<1>()?[0])),
            0xcd => Value::Integer(i64::from(u16::from_be_bytes(self.array()?))),
            0xce => Value::Integer(i64::from(u32::from_be_bytes(self.array()?))),
            0xcf => {
                let n = u64::from_be_bytes(self.array()?);
                i64::try_from(n).map_or(Value::Number(n as f64), Value::Integer)
            }
            0xd0 => Value::Integer(i64::from(self.array::<1>()?[0] as i8)),
            0xd1 => Value::Integer(i64::from(i16::from_be_bytes(self.array()?))),
            0xd2 => Value::Integer(i64::from(i32::from_be_bytes(self.array()?))),
            0xd3 => Value::Integer(i64::from_be_bytes(self.array()?)),
            0xca => Value::Number(f64::from(f32::from_be_bytes(self.array()?))),
            0xcb => Value::Number(f64::from_be_bytes(self.array()?)),
            0xa0..=0xbf => self.string(lua, usize::from(tag & 0x1f))?,
            // str8/16/32, and bin8/16/32 read as the strings they are in Lua.
            0xd9 | 0xc4 => self.string_of(lua, 1)?,
            0xda | 0xc5 => self.string_of(lua, 2)?,
            0xdb | 0xc6 => self.string_of(lua, 4)?,
            0x90..=0x9f => self.sequence(lua, usize::from(tag & 0x0f), depth)?,
            0xdc => self.sequence_of(lua, 2, depth)?,
            0xdd => self.sequence_of(lua, 4, depth)?,
            0x80..=0x8f => self.map(lua, usize::from(tag & 0x0f), depth)?,
            0xde => self.map_of(lua, 2, depth)?,
            0xdf => self.map_of(lua, 4, depth)?,
            _ => return Err(bad_format()),
        })
    }

    fn string(&mut self, lua: &Lua, len: usize) -> Result<Value, LibError> {
        Ok(Value::String(lua.create_string(self.take(len)?)?))
    }

    fn string_of(&mut self, lua: &Lua, width: usize) -> Result<Value, LibError> {
        let len = self.length(width)?;
        self.string(lua, len)
    }

    /// A container's table, with no more room than the bytes left could fill (a length
    /// from the input is not to be trusted).
    fn container(&mut self, lua: &Lua, len: usize, depth: usize, array: bool) -> Result<Table, LibError> {
        if depth >= MAX_UNPACK_NESTING {
            return Err(raised(format!(
                "Bad data format in input: nested deeper than {MAX_UNPACK_NESTING}."
            )));
        }
        let room = len.min(self.data.len() - self.at);
        let table = if array {
            lua.create_table_with_capacity(room, 0)?
        } else {
            lua.create_table_with_capacity(0, room)?
        };
        Ok(table)
    }

    fn sequence(&mut self, lua: &Lua, len: usize, depth: usize) -> Result<Value, LibError> {
        let table = self.container(lua, len, depth, true)?;
        for i in 1..=len {
            table.raw_set(i, self.value(lua, depth + 1)?)?;
        }
        Ok(Value::Table(table))
    }

    fn sequence_of(&mut self, lua: &Lua, width: usize, depth: usize) -> Result<Value, LibError> {
        let len = self.length(width)?;
        self.sequence(lua, len, depth)
    }

    fn map(&mut self, lua: &Lua, len: usize, depth: usize) -> Result<Value, LibError> {
        let table = self.container(lua, len, depth, false)?;
        for _ in 0..len {
            let key = self.value(lua, depth + 1)?;
            let value = self.value(lua, depth + 1)?;
            match key {
                Value::Nil => return Err(raised("table index is nil")),
                Value::Number(n) if n.is_nan() => return Err(raised("table index is NaN")),
                key => table.raw_set(key, value)?,
            }
        }
        Ok(Value::Table(table))
    }

    fn map_of(&mut self, lua: &Lua, width: usize, depth: usize) -> Result<Value, LibError> {
        let len = self.length(width)?;
        self.map(lua, len, depth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        lua.globals().set("cmsgpack", library(&lua).unwrap()).unwrap();
        lua
    }

    /// The hex of the string `code` returns.
    fn hex(lua: &Lua, code: &str) -> String {
        let packed: mlua::String = lua.load(code).eval().unwrap();
        packed.as_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The message of the error `code` raises (a plain string, as Redis's C library raises).
    fn failure(lua: &Lua, code: &str) -> String {
        let wrapped = format!("local ok, err = pcall(function() {code} end) assert(not ok) return err");
        lua.load(wrapped)
            .eval::<String>()
            .unwrap_or_else(|err| panic!("{code}: {err}"))
    }

    #[test]
    fn packs_each_type_as_lua_cmsgpack_does() {
        let lua = lua();
        let cases = [
            // Redis's scripting.tcl: "cmsgpack can pack double?" and "… negative int64?".
            ("cmsgpack.pack(0.1)", "cb3fb999999999999a"),
            ("cmsgpack.pack(-1099511627776)", "d3ffffff0000000000"),
            // Integral floats are integers; lossless floats are float32.
            ("cmsgpack.pack(2^40)", "cf0000010000000000"),
            ("cmsgpack.pack(3.0)", "03"),
            ("cmsgpack.pack(0.5)", "ca3f000000"),
            (
                "cmsgpack.pack(1, 127, 128, 255, 256, 65535, 65536)",
                "017fcc80ccffcd0100cdffffce00010000",
            ),
            (
                "cmsgpack.pack(-1, -32, -33, -128, -129, -32768, -32769)",
                "ffe0d0dfd080d1ff7fd18000d2ffff7fff",
            ),
            ("cmsgpack.pack(4294967296)", "cf0000000100000000"),
            ("cmsgpack.pack(-2147483649)", "d3ffffffff7fffffff"),
            ("cmsgpack.pack(2^63)", "ca5f000000"),
            ("cmsgpack.pack(2^63 + 2^11)", "cb43e0000000000001"),
            ("cmsgpack.pack(nil, true, false, print)", "c0c3c2c0"),
            ("cmsgpack.pack('', 'abc')", "a0a3616263"),
            ("cmsgpack.pack({}, {1, 2, 3}, {a = 1})", "909301020381a16101"),
        ];
        for (code, expected) in cases {
            assert_eq!(hex(&lua, &format!("return {code}")), expected, "{code}");
        }
        let sizes = [
            (31, "bf"),
            (32, "d920"),
            (255, "d9ff"),
            (256, "da0100"),
            (65536, "db00010000"),
        ];
        for (len, header) in sizes {
            let got = hex(&lua, &format!("return cmsgpack.pack(string.rep('x', {len}))"));
            assert!(got.starts_with(header) && got.len() == header.len() + 2 * len, "{len}");
        }
        // Holes make a map; 16 elements an array16, 16 pairs a map16.
        assert_eq!(hex(&lua, "return cmsgpack.pack({1, nil, 3})"), "8201010303");
        assert!(hex(
            &lua,
            "local t = {} for i = 1, 16 do t[i] = i end return cmsgpack.pack(t)"
        )
        .starts_with("dc0010"));
        assert!(hex(
            &lua,
            "local t = {} for i = 1, 16 do t['k' .. i] = i end return cmsgpack.pack(t)"
        )
        .starts_with("de0010"));
    }

    #[test]
    fn malformed_input_and_misuse_raise_redis_errors() {
        let lua = lua();
        let cases = [
            ("cmsgpack.unpack('\\xc1')", "Bad data format in input."),
            ("cmsgpack.unpack('\\xd4\\x01\\x02')", "Bad data format in input."),
            ("cmsgpack.unpack('\\x92\\x01')", "Missing bytes in input."),
            (
                "cmsgpack.unpack('\\xdb\\xff\\xff\\xff\\xffab')",
                "Missing bytes in input.",
            ),
            (
                "cmsgpack.unpack('\\xdd\\xff\\xff\\xff\\xff')",
                "Missing bytes in input.",
            ),
            ("cmsgpack.unpack('\\xcb\\x01')", "Missing bytes in input."),
            ("cmsgpack.unpack('\\x81\\xc0\\x01')", "table index is nil"),
            ("cmsgpack.unpack(string.rep('\\x91', 100000))", "nested deeper than 128"),
            (
                "cmsgpack.unpack(string.rep('\\x01', 8001))",
                "too many return values at once",
            ),
            (
                "cmsgpack.unpack_one('\\x01', -1)",
                "Invalid request to unpack with offset of -1 and limit of 1.",
            ),
            (
                "cmsgpack.unpack_one('\\x01', 2)",
                "Start offset 2 greater than input length 1.",
            ),
            (
                "cmsgpack.unpack()",
                "bad argument #1 to 'unpack' (string expected, got no value)",
            ),
            (
                "cmsgpack.unpack_limit('\\x01')",
                "bad argument #2 to 'unpack_limit' (number expected, got no value)",
            ),
            (
                "cmsgpack.pack()",
                "bad argument #0 to 'pack' (MessagePack pack needs input.)",
            ),
            (
                "local t = {} for i = 1, 8 do t[i] = t end cmsgpack.pack(t)",
                "larger than 4194304 bytes",
            ),
        ];
        for (code, expected) in cases {
            let got = failure(&lua, code);
            assert!(got.contains(expected), "{code}: {got}");
        }
    }
}
