//! The `struct` library Redis preloads for scripts (Roberto Ierusalimschy's struct.c 1.7,
//! Redis's `deps/lua/src/lua_struct.c`): `struct.pack(fmt, ...)`, `struct.unpack(fmt, s
//! [, pos])` (the values, then the position after them) and `struct.size(fmt)`.
//!
//! A format is a sequence of options: `<` little endian, `>` big endian, `![n]` alignment
//! (`!` alone: 8), `x` a zero byte, `b`/`B` signed/unsigned char, `h`/`H` short, `l`/`L`
//! long, `T` size_t, `i[n]`/`I[n]` an integer of n bytes (4 by default, at most
//! [`MAX_INT_SIZE_BYTES`]), `c[n]` n chars (`c0`: the whole string when packing, the
//! length read just before when unpacking), `s` a zero-terminated string, `f` float, `d`
//! double, and spaces. Sizes are those of the 64-bit machines Redis runs on; the default
//! byte order is little endian everywhere (lua_struct's is the machine's), so a script
//! packs alike on every node. Numbers unpack as Lua 5.4 integers where they fit (Lua 5.1's
//! doubles in Redis), an unsigned 64-bit one past `i64::MAX` as a float.
//!
//! Bad formats and short data raise lua_struct's errors. The work is bounded without
//! charging the budget: results by [`clib::MAX_RESULTS`], output by
//! [`clib::MAX_OUTPUT_BYTES`], and the rest by the format's length and the arguments a
//! call can pass.

use mlua::{Lua, MultiValue, Table, Value};

use crate::clib::{self, bad_argument, check_number, check_string, opt_integer, raised, LibError};

/// The largest integer `i[n]` / `I[n]` may be: lua_struct's `MAXINTSIZE`. Only the low
/// 64 bits carry the value (the rest pack as zeros and unpack ignored), as there.
pub const MAX_INT_SIZE_BYTES: usize = 32;

/// The largest number a format may carry (a size, an alignment): lua_struct reads it into
/// a C `int` and refuses more.
pub const MAX_FORMAT_NUMBER: usize = i32::MAX as usize;

/// `i` and `I` without a size: C's `int`.
const INT_SIZE_BYTES: usize = 4;

/// `l`, `L` and `T`: C's `long` and `size_t` on 64-bit machines.
const LONG_SIZE_BYTES: usize = 8;

/// `!` without a number: the alignment of a double in a C struct (lua_struct's `MAXALIGN`).
const MAX_ALIGN_BYTES: usize = 8;

/// The `struct` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    clib::library(lua, &[("pack", pack), ("unpack", unpack), ("size", size)])
}

/// Byte order: `<` and `>`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Endian {
    /// Least significant byte first (the default).
    Little,
    /// Most significant byte first.
    Big,
}

/// The options the format has set so far: byte order and largest alignment.
struct Header {
    /// Byte order of the integers and floats that follow.
    endian: Endian,
    /// The largest alignment an item gets (`!n`); 1, none, until set.
    align: usize,
}

impl Default for Header {
    fn default() -> Header {
        Header {
            endian: Endian::Little,
            align: 1,
        }
    }
}

/// A format being read, one option at a time.
struct Format<'a> {
    /// The format string.
    text: &'a [u8],
    /// The next option's offset.
    at: usize,
    /// The library function reading it, named in argument errors.
    function: &'static str,
}

impl Format<'_> {
    fn next(&mut self) -> Option<u8> {
        let option = *self.text.get(self.at)?;
        self.at += 1;
        Some(option)
    }

    /// lua_struct's `getnum`: the digits that follow, or `default`.
    fn number(&mut self, default: usize) -> Result<usize, LibError> {
        if !self.text.get(self.at).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut n = 0usize;
        while let Some(digit) = self.text.get(self.at).filter(|d| d.is_ascii_digit()) {
            n = n * 10 + usize::from(digit - b'0');
            if n > MAX_FORMAT_NUMBER {
                return Err(raised("integral size overflow"));
            }
            self.at += 1;
        }
        Ok(n)
    }

    /// lua_struct's `optsize`: the bytes `option` takes (0 for the controls and `s`).
    fn size(&mut self, option: u8) -> Result<usize, LibError> {
        Ok(match option {
            b'b' | b'B' | b'x' => 1,
            b'h' | b'H' => 2,
            b'l' | b'L' | b'T' => LONG_SIZE_BYTES,
            b'f' => 4,
            b'd' => 8,
            b'c' => self.number(1)?,
            b'i' | b'I' => {
                let size = self.number(INT_SIZE_BYTES)?;
                if size > MAX_INT_SIZE_BYTES {
                    return Err(raised(format!(
                        "integral size {size} is larger than limit of {MAX_INT_SIZE_BYTES}"
                    )));
                }
                size
            }
            _ => 0,
        })
    }

    /// lua_struct's `controloptions`: endianness, alignment, spaces; anything else is not
    /// an option.
    fn control(&mut self, option: u8, header: &mut Header) -> Result<(), LibError> {
        match option {
            b' ' => {}
            b'<' => header.endian = Endian::Little,
            b'>' => header.endian = Endian::Big,
            b'!' => {
                let align = self.number(MAX_ALIGN_BYTES)?;
                if !align.is_power_of_two() {
                    return Err(raised(format!("alignment {align} is not a power of 2")));
                }
                header.align = align;
            }
            other => {
                let message = format!("invalid format option '{}'", char::from(other));
                return Err(bad_argument(1, self.function, &message));
            }
        }
        Ok(())
    }
}

/// lua_struct's `gettoalign`: padding before an item of `size` bytes at offset `len`.
fn padding(len: usize, header: &Header, option: u8, size: usize) -> usize {
    if size == 0 || option == b'c' {
        return 0;
    }
    let size = size.min(header.align);
    (size - (len & (size - 1))) & (size - 1)
}

fn is_integer(option: u8) -> bool {
    matches!(option, b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I')
}

fn pack(lua: &Lua, args: MultiValue) -> Result<MultiValue, LibError> {
    let text = check_string(lua, &args, 1, "pack")?;
    let mut format = Format {
        text: &text.as_bytes(),
        at: 0,
        function: "pack",
    };
    let mut header = Header::default();
    let mut out = Vec::new();
    let mut position = 2;
    while let Some(option) = format.next() {
        let size = format.size(option)?;
        out.resize(out.len() + padding(out.len(), &header, option, size), 0);
        match option {
            _ if is_integer(option) => {
                let value = integer_bits(&check_number(lua, &args, position, "pack")?);
                position += 1;
                let mut bytes = [0u8; MAX_INT_SIZE_BYTES];
                bytes[..8].copy_from_slice(&value.to_le_bytes());
                let bytes = &mut bytes[..size];
                if header.endian == Endian::Big {
                    bytes.reverse();
                }
                out.extend_from_slice(bytes);
            }
            b'x' => out.push(0),
            b'f' | b'd' => {
                let value = match check_number(lua, &args, position, "pack")? {
                    Value::Integer(i) => i as f64,
                    Value::Number(n) => n,
                    _ => 0.0,
                };
                position += 1;
                let start = out.len();
                match option {
                    b'f' => out.extend_from_slice(&(value as f32).to_le_bytes()),
                    _ => out.extend_from_slice(&value.to_le_bytes()),
                }
                if header.endian == Endian::Big {
                    out[start..].reverse();
                }
            }
            b'c' | b's' => {
                let string = check_string(lua, &args, position, "pack")?;
                let bytes = string.as_bytes();
                let size = if size == 0 { bytes.len() } else { size };
                if bytes.len() < size {
                    return Err(bad_argument(position, "pack", "string too short"));
                }
                position += 1;
                out.extend_from_slice(&bytes[..size]);
                if option == b's' {
                    out.push(0);
                }
            }
            _ => format.control(option, &mut header)?,
        }
        if out.len() > clib::MAX_OUTPUT_BYTES {
            return Err(raised(format!(
                "struct.pack output larger than {} bytes",
                clib::MAX_OUTPUT_BYTES
            )));
        }
    }
    Ok(MultiValue::from_vec(vec![Value::String(lua.create_string(&out)?)]))
}

/// lua_struct's `putinteger`: a number as the 64 bits it packs (a negative one in two's
/// complement; a float truncated).
fn integer_bits(value: &Value) -> u64 {
    match *value {
        Value::Integer(i) => i as u64,
        Value::Number(n) if n < 0.0 => (n as i64) as u64,
        Value::Number(n) => n as u64,
        _ => 0,
    }
}

/// lua_struct's `getinteger`: `bytes` as an integer; past 8 bytes only the low 64 bits count.
fn integer_value(bytes: &[u8], endian: Endian, signed: bool) -> Value {
    let fold = |bits: u64, byte: &u8| (bits << 8) | u64::from(*byte);
    let bits = match endian {
        Endian::Big => bytes.iter().fold(0, fold),
        Endian::Little => bytes.iter().rev().fold(0, fold),
    };
    let size = bytes.len();
    if signed {
        let value = if size == 0 || size >= 8 {
            bits as i64
        } else {
            let unused = 64 - 8 * size as u32;
            ((bits << unused) as i64) >> unused
        };
        return Value::Integer(value);
    }
    i64::try_from(bits).map_or(Value::Number(bits as f64), Value::Integer)
}

fn too_short() -> LibError {
    bad_argument(2, "unpack", "data string too short")
}

fn unpack(lua: &Lua, args: MultiValue) -> Result<MultiValue, LibError> {
    let text = check_string(lua, &args, 1, "unpack")?;
    let data = check_string(lua, &args, 2, "unpack")?;
    let data = data.as_bytes();
    let start = opt_integer(lua, &args, 3, "unpack", 1)?;
    if start < 1 {
        return Err(bad_argument(3, "unpack", "offset must be 1 or greater"));
    }
    let mut at = usize::try_from(start - 1).unwrap_or(usize::MAX);
    let mut format = Format {
        text: &text.as_bytes(),
        at: 0,
        function: "unpack",
    };
    let mut header = Header::default();
    let mut results = Vec::new();
    let fits = |at: usize, size: usize| size <= data.len() && at <= data.len() - size;
    while let Some(option) = format.next() {
        let mut size = format.size(option)?;
        at = at.saturating_add(padding(at, &header, option, size));
        if !fits(at, size) {
            return Err(too_short());
        }
        // Room for this result and the final position, as lua_struct asks of the stack.
        if results.len() + 2 > clib::MAX_RESULTS {
            return Err(raised("stack overflow (too many results)"));
        }
        match option {
            _ if is_integer(option) => {
                let signed = option.is_ascii_lowercase();
                results.push(integer_value(&data[at..at + size], header.endian, signed));
            }
            b'x' => {}
            b'f' | b'd' => {
                let mut bytes = data[at..at + size].to_vec();
                if header.endian == Endian::Big {
                    bytes.reverse();
                }
                let value = match *bytes.as_slice() {
                    [a, b, c, d] => f64::from(f32::from_le_bytes([a, b, c, d])),
                    [a, b, c, d, e, f, g, h] => f64::from_le_bytes([a, b, c, d, e, f, g, h]),
                    _ => return Err(too_short()),
                };
                results.push(Value::Number(value));
            }
            b'c' => {
                if size == 0 {
                    size = previous_size(lua, results.pop())?;
                    if !fits(at, size) {
                        return Err(too_short());
                    }
                }
                results.push(Value::String(lua.create_string(&data[at..at + size])?));
            }
            b's' => {
                let Some(len) = data[at..].iter().position(|&byte| byte == 0) else {
                    return Err(raised("unfinished string in data"));
                };
                results.push(Value::String(lua.create_string(&data[at..at + len])?));
                size = len + 1;
            }
            _ => format.control(option, &mut header)?,
        }
        at += size;
    }
    results.push(Value::Integer(i64::try_from(at).unwrap_or(i64::MAX).saturating_add(1)));
    Ok(MultiValue::from_vec(results))
}

/// `c0` when unpacking: the length is the number read just before (and not returned).
fn previous_size(lua: &Lua, previous: Option<Value>) -> Result<usize, LibError> {
    let needs = || raised("format 'c0' needs a previous size");
    let number = match previous {
        Some(Value::Integer(i)) => i as f64,
        Some(Value::Number(n)) => n,
        Some(text @ Value::String(_)) => lua.coerce_number(text)?.ok_or_else(needs)?,
        _ => return Err(needs()),
    };
    // A negative or huge length cannot fit the data: "data string too short" follows.
    Ok(if number >= 0.0 { number as usize } else { usize::MAX })
}

fn size(lua: &Lua, args: MultiValue) -> Result<MultiValue, LibError> {
    let text = check_string(lua, &args, 1, "size")?;
    let mut format = Format {
        text: &text.as_bytes(),
        at: 0,
        function: "size",
    };
    let mut header = Header::default();
    let mut total = 0usize;
    while let Some(option) = format.next() {
        let size = format.size(option)?;
        total += padding(total, &header, option, size);
        if option == b's' {
            return Err(bad_argument(1, "size", "option 's' has no fixed size"));
        }
        if option == b'c' && size == 0 {
            return Err(bad_argument(1, "size", "option 'c0' has no fixed size"));
        }
        if !(is_integer(option) || matches!(option, b'x' | b'f' | b'd' | b'c')) {
            format.control(option, &mut header)?;
        }
        total = total
            .checked_add(size)
            .ok_or_else(|| raised("struct.size: the format's size overflows"))?;
    }
    Ok(MultiValue::from_vec(vec![Value::Integer(
        i64::try_from(total).unwrap_or(i64::MAX),
    )]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        lua.globals().set("struct", library(&lua).unwrap()).unwrap();
        lua
    }

    fn bytes(lua: &Lua, code: &str) -> Vec<u8> {
        let packed: mlua::String = lua.load(code).eval().unwrap_or_else(|err| panic!("{code}: {err}"));
        packed.as_bytes().to_vec()
    }

    #[test]
    fn packs_unpacks_and_sizes_as_lua_struct_does() {
        let lua = lua();
        let packs: [(&str, &[u8]); 14] = [
            ("struct.pack('>I2', 258)", b"\x01\x02"),
            ("struct.pack('<I2', 258)", b"\x02\x01"),
            ("struct.pack('I2', 258)", b"\x02\x01"),
            ("struct.pack('b', -1)", b"\xff"),
            ("struct.pack('>h', -2)", b"\xff\xfe"),
            ("struct.pack('>i3', 66051)", b"\x01\x02\x03"),
            ("struct.pack('<l', 1)", b"\x01\0\0\0\0\0\0\0"),
            ("struct.pack('s', 'hi')", b"hi\0"),
            ("struct.pack('c3', 'abcdef')", b"abc"),
            ("struct.pack('c0', 'abc')", b"abc"),
            ("struct.pack('<f', 0.5)", b"\0\0\0\x3f"),
            ("struct.pack('>d', -2)", b"\xc0\0\0\0\0\0\0\0"),
            ("struct.pack('!4 b i', 1, 2)", b"\x01\0\0\0\x02\0\0\0"),
            ("struct.pack('x B', 7)", b"\0\x07"),
        ];
        for (code, expected) in packs {
            assert_eq!(bytes(&lua, &format!("return {code}")), expected, "{code}");
        }
        // Past 8 bytes only the low 64 bits carry the value, as in lua_struct.
        let wide = bytes(&lua, "return struct.pack('<i16', -1)");
        assert_eq!(wide, [[0xff; 8], [0; 8]].concat());
        assert_eq!(
            bytes(&lua, "return struct.pack('>I16', 1)"),
            [[0; 15].as_slice(), &[1]].concat()
        );
        let unpacks: [(&str, &str); 12] = [
            ("struct.unpack('>I2', '\\1\\2')", "258 3"),
            ("struct.unpack('<I2', '\\1\\2')", "513 3"),
            ("struct.unpack('b B', '\\255\\255')", "-1 255 3"),
            ("struct.unpack('>h', '\\255\\254')", "-2 3"),
            ("struct.unpack('s', 'hi\\0rest')", "hi 4"),
            ("struct.unpack('B c0', '\\3abcd')", "abc 5"),
            ("struct.unpack('x b', '\\0\\5')", "5 3"),
            ("struct.unpack('b', 'ab', 2)", "98 3"),
            ("struct.unpack('<d', struct.pack('<d', 1.5))", "1.5 9"),
            ("struct.unpack('>f', struct.pack('>f', -0.25))", "-0.25 5"),
            ("struct.unpack('<i16', struct.pack('<i16', -5))", "-5 17"),
            ("struct.unpack('!4 b i', struct.pack('!4 b i', 1, -9))", "1 -9 9"),
        ];
        for (code, expected) in unpacks {
            let code =
                format!("local r = {{{code}}} for i = 1, #r do r[i] = tostring(r[i]) end return table.concat(r, ' ')");
            assert_eq!(lua.load(&code).eval::<String>().unwrap(), expected, "{code}");
        }
        for (format, size) in [
            (">iii", 12),
            ("!8 b d", 16),
            ("b d", 9),
            ("c10 i8 T", 26),
            ("!2 b h", 4),
        ] {
            let got: i64 = lua.load(format!("return struct.size('{format}')")).eval().unwrap();
            assert_eq!(got, size, "{format}");
        }
    }

    #[test]
    fn integers_round_trip_at_every_size_and_order() {
        let lua = lua();
        let round_trip: mlua::Function = lua
            .load("return function(f, v) return (struct.unpack(f, struct.pack(f, v))) end")
            .eval()
            .unwrap();
        let samples = [
            0i64,
            1,
            -1,
            127,
            -128,
            255,
            256,
            32767,
            -32768,
            65535,
            1 << 31,
            -(1 << 31),
            i64::MAX,
            i64::MIN,
        ];
        for size in 1..=8u32 {
            for endian in ["<", ">"] {
                for (letter, signed) in [("i", true), ("I", false)] {
                    for &value in &samples {
                        let got: Value = round_trip.call((format!("{endian}{letter}{size}"), value)).unwrap();
                        let bits = 8 * size;
                        let expected = match (signed, bits) {
                            // An unsigned 64-bit value past i64 is a float, as in Lua.
                            (false, 64) if value < 0 => Value::Number(value as u64 as f64),
                            (_, 64) => Value::Integer(value),
                            (true, _) => Value::Integer((value << (64 - bits)) >> (64 - bits)),
                            (false, _) => Value::Integer(value & ((1i64 << bits) - 1)),
                        };
                        assert_eq!(got, expected, "{endian}{letter}{size} {value}");
                    }
                }
            }
        }
    }

    #[test]
    fn bad_formats_and_short_data_raise_lua_errors() {
        let lua = lua();
        let cases = [
            (
                "struct.pack('z')",
                "bad argument #1 to 'pack' (invalid format option 'z')",
            ),
            ("struct.pack('i33', 1)", "integral size 33 is larger than limit of 32"),
            ("struct.pack('!3')", "alignment 3 is not a power of 2"),
            ("struct.pack('!0')", "alignment 0 is not a power of 2"),
            ("struct.pack('c99999999999', 'x')", "integral size overflow"),
            (
                "struct.pack('i')",
                "bad argument #2 to 'pack' (number expected, got no value)",
            ),
            (
                "struct.pack('i', {})",
                "bad argument #2 to 'pack' (number expected, got table)",
            ),
            (
                "struct.pack('b c5', 1, 'ab')",
                "bad argument #3 to 'pack' (string too short)",
            ),
            (
                "struct.pack()",
                "bad argument #1 to 'pack' (string expected, got no value)",
            ),
            (
                "struct.unpack('i', 'ab')",
                "bad argument #2 to 'unpack' (data string too short)",
            ),
            ("struct.unpack('b', 'a', 2)", "data string too short"),
            (
                "struct.unpack('b', 'a', 0)",
                "bad argument #3 to 'unpack' (offset must be 1 or greater)",
            ),
            ("struct.unpack('s', 'abc')", "unfinished string in data"),
            ("struct.unpack('c0', 'abc')", "format 'c0' needs a previous size"),
            ("struct.unpack('B c0', '\\255ab')", "data string too short"),
            ("struct.unpack('c2147483647', 'ab')", "data string too short"),
            ("struct.unpack('q', 'ab')", "invalid format option 'q'"),
            (
                "struct.unpack(string.rep('b', 9000), string.rep('a', 9000))",
                "stack overflow (too many results)",
            ),
            (
                "struct.size('s')",
                "bad argument #1 to 'size' (option 's' has no fixed size)",
            ),
            ("struct.size('c0')", "option 'c0' has no fixed size"),
            ("struct.size('bq')", "invalid format option 'q'"),
            (
                "struct.pack(string.rep('x', 4194305))",
                "output larger than 4194304 bytes",
            ),
        ];
        for (code, expected) in cases {
            let wrapped = format!("local ok, err = pcall(function() return {code} end) assert(not ok) return err");
            let got: String = lua.load(&wrapped).eval().unwrap_or_else(|err| panic!("{code}: {err}"));
            assert!(got.contains(expected), "{code}: {got}");
        }
    }
}
