//! Redis's own tests of the libraries it preloads (`tests/unit/scripting.tcl`, their Lua
//! unchanged) run in ferry's VM, and the walks that look for a panic in their parsers.

use bytes::Bytes;
use ferry_func::memory::{block_on, MemoryCtx};
use ferry_lua::vm::Vm;
use ferry_resp::Reply;
use mlua::{Lua, Value};

/// What a script whose body is `body` returns, run as a function in a fresh VM.
fn run(body: &str) -> Result<Reply, String> {
    let code = format!("#!lua name=t\nredis.register_function('t', function()\n{body}\nend)");
    let (mut vm, _, _) = Vm::load(&code).map_err(|err| err.to_string())?;
    let mut ctx = MemoryCtx::default();
    block_on(vm.call(&mut ctx, "t", "db0", &[], &[], false)).map_err(|err| err.to_string())
}

/// A Lua state with the libraries and no memory cap.
fn plain_lua() -> Lua {
    let lua = Lua::new();
    lua.globals()
        .set("cmsgpack", ferry_lua::cmsgpack::library(&lua).unwrap())
        .unwrap();
    lua.globals()
        .set("struct", ferry_lua::lua_struct::library(&lua).unwrap())
        .unwrap();
    lua
}

fn bulk(text: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(text.as_bytes()))
}

/// Redis's Lua to write a packed string in hex.
const HEX: &str = r#"local h = ""
for i = 1, #encoded do
    h = h .. string.format("%02x",string.byte(encoded,i))
end"#;

#[test]
fn cmsgpack_packs_doubles_and_negative_int64s_as_in_redis() {
    let double = format!("local encoded = cmsgpack.pack(0.1)\n{HEX}\nreturn h");
    assert_eq!(run(&double), Ok(bulk("cb3fb999999999999a")));
    let int64 = format!("local encoded = cmsgpack.pack(-1099511627776)\n{HEX}\nreturn h");
    assert_eq!(run(&int64), Ok(bulk("d3ffffff0000000000")));
}

#[test]
fn cmsgpack_packs_a_table_holding_itself_as_in_redis() {
    let body = format!(
        r#"local a = {{x=nil,y=5}}
local b = {{x=a}}
a['x'] = b
local encoded = cmsgpack.pack(a)
{HEX}
local re = cmsgpack.unpack(encoded)
assert(re)
assert(re.x)
assert(re.x.x.y == re.y)
assert(re.x.x.x.x.y == re.y)
assert(re.x.x.x.x.x.x.y == re.y)
assert(re.x.x.x.x.x.x.x.x.x.x.y == re.y)
assert(re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.y == re.y)
assert(re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x)
assert(re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x == nil)
return {{h, re.x.x.x.x.x.x.x.x.y == re.y, re.y == 5}}"#
    );
    let Ok(Reply::Array(items)) = run(&body) else {
        panic!("an array")
    };
    // The same bytes as Redis's, a map's keys in Lua 5.4's order rather than 5.1's.
    let expected = "82a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a178c0";
    let sorted = |hex: &[u8]| {
        let mut pairs: Vec<&[u8]> = hex.chunks(2).collect();
        pairs.sort_unstable();
        pairs.concat()
    };
    let Reply::Bulk(hex) = &items[0] else { panic!("hex") };
    assert_eq!(sorted(hex), sorted(expected.as_bytes()));
    assert_eq!(items[1..], [Reply::Integer(1), Reply::Integer(1)]);
}

#[test]
fn cmsgpack_is_a_readonly_table_as_in_redis() {
    let err = run("cmsgpack.pack = function() return 1 end").unwrap_err();
    assert!(err.contains("Attempt to modify a readonly table"), "{err}");
    let err = run("struct.pack = function() return 1 end").unwrap_err();
    assert!(err.contains("Attempt to modify a readonly table"), "{err}");
}

/// Redis's scripting.tcl "cmsgpack pack/unpack smoke test", its Lua unchanged.
const SMOKE: &str = r#"
    local str_lt_32 = string.rep("x", 30)
    local str_lt_255 = string.rep("x", 250)
    local str_lt_65535 = string.rep("x", 65530)
    local str_long = string.rep("x", 100000)
    local array_lt_15 = {1, 2, 3, 4, 5}
    local array_lt_65535 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}
    local array_big = {}
    for i=1, 100000 do
        array_big[i] = i
    end
    local map_lt_15 = {a=1, b=2}
    local map_big = {}
    for i=1, 100000 do
        map_big[tostring(i)] = i
    end
    local some_map = {
        s1=str_lt_32,
        s2=str_lt_255,
        s3=str_lt_65535,
        s4=str_long,
        d1=0.1,
        i1=1,
        i2=250,
        i3=65530,
        i4=100000,
        i5=2^40,
        i6=-1,
        i7=-120,
        i8=-32000,
        i9=-100000,
        i10=-3147483648,
        a1=array_lt_15,
        a2=array_lt_65535,
        a3=array_big,
        m1=map_lt_15,
        m2=map_big,
        b1=false,
        b2=true,
        n=nil
    }
    local encoded = cmsgpack.pack(some_map)
    local decoded = cmsgpack.unpack(encoded)
    assert(table.concat(some_map) == table.concat(decoded))
    local offset, decoded_one = cmsgpack.unpack_one(encoded, 0)
    assert(table.concat(some_map) == table.concat(decoded_one))
    assert(offset == -1)

    local encoded_multiple = cmsgpack.pack(str_lt_32, str_lt_255, str_lt_65535, str_long)
    local offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, 0)
    assert(obj == str_lt_32)
    offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, offset)
    assert(obj == str_lt_255)
    offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, offset)
    assert(obj == str_lt_65535)
    offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, offset)
    assert(obj == str_long)
    assert(offset == -1)
"#;

#[test]
fn cmsgpack_unpacks_what_it_packs_redis_smoke_test() {
    // Redis's smoke test builds 100,000-entry tables: more than a ferry VM's memory cap
    // (`vm::MAX_VM_MEMORY_BYTES`), so it runs in a Lua state without one.
    plain_lua().load(SMOKE).exec().unwrap();
    let lua = plain_lua();
    let code = "local t = cmsgpack.unpack(cmsgpack.pack({a = {1, 2, {b = 'c'}}, n = -7.25, s = 'x', t = true}))
        return t.a[3].b .. t.a[2] .. t.n .. t.s .. tostring(t.t)";
    assert_eq!(lua.load(code).eval::<String>().unwrap(), "c2-7.25xtrue");
    let code = "return cmsgpack.unpack(cmsgpack.pack(1, 'two', nil, false))";
    let got: (i64, String, Value, bool) = lua.load(code).eval().unwrap();
    assert_eq!((got.0, got.1.as_str(), got.2.is_nil(), got.3), (1, "two", true, false));
    // unpack_limit(s, 0) is unpack (no offset), as in lua-cmsgpack; "" unpacks to nothing.
    let got: (i64, i64) = lua
        .load("return cmsgpack.unpack_limit(cmsgpack.pack(5, 6), 0)")
        .eval()
        .unwrap();
    assert_eq!(got, (5, 6));
    let count: i64 = lua.load("return select('#', cmsgpack.unpack(''))").eval().unwrap();
    assert_eq!(count, 0);
    let code = "return cmsgpack.unpack_limit(cmsgpack.pack(5, 6, 7), 2, 0)";
    assert_eq!(lua.load(code).eval::<(i64, i64, i64)>().unwrap(), (2, 5, 6));
    // Other encoders' bin8 reads as a string; a uint64 past i64 as a float.
    let text: String = lua.load("return cmsgpack.unpack('\\xc4\\x02hi')").eval().unwrap();
    assert_eq!(text, "hi");
    let big: f64 = lua
        .load("return cmsgpack.unpack('\\xcf' .. string.rep('\\xff', 8))")
        .eval()
        .unwrap();
    assert_eq!(big, 18_446_744_073_709_551_615.0);
}

#[test]
fn packing_counts_against_the_call_s_budget_and_memory_cap() {
    // A map of 30,000 keys reachable at 15 levels: each level packs it anew (some 350 ms
    // of work through mlua), which the hook never sees. It is charged to the instruction
    // budget, so the call ends there, past the script's pcall.
    let body = "local b = {} for i = 1, 30000 do b['k' .. i] = true end
        local top = {} local c = top for i = 1, 15 do local n = {b} c[2] = n c = n end
        return tostring(pcall(cmsgpack.pack, top))";
    let err = run(body).unwrap_err();
    assert!(err.contains("Script killed"), "{err}");
    // A table holding itself eight times unfolds to 8^16 values, but each of its 16 levels
    // is walked once and then copied: it fills the output cap, well inside the budget.
    let body = "local t = {} for i = 1, 8 do t[i] = t end return {pcall(cmsgpack.pack, t)}";
    assert_eq!(
        run(body),
        Ok(Reply::Array(vec![
            Reply::Null,
            bulk("MessagePack pack output larger than 4194304 bytes")
        ]))
    );
    // A value past the VM's memory cap fails as Lua's own allocations do.
    let body = "local x = string.rep('x', 1600000) local s = cmsgpack.pack(x)
        local ok, err = pcall(cmsgpack.unpack, s) return {tostring(ok), err, #x}";
    assert_eq!(
        run(body),
        Ok(Reply::Array(vec![
            bulk("false"),
            bulk("not enough memory"),
            Reply::Integer(1_600_000)
        ]))
    );
}

#[test]
fn struct_packs_in_a_script_as_in_redis() {
    let body = "return {struct.pack('>I2', 258), struct.unpack('>I2', '\\1\\2'), struct.size('>iii'),
        select(2, struct.unpack('>I2', '\\1\\2'))}";
    assert_eq!(
        run(body),
        Ok(Reply::Array(vec![
            bulk("\x01\x02"),
            Reply::Integer(258),
            Reply::Integer(12),
            Reply::Integer(3)
        ]))
    );
}

#[test]
fn struct_never_panics_on_arbitrary_formats_and_data() {
    // A deterministic walk over formats made of every option, digits and junk, against
    // short data: each call returns or raises.
    let lua = plain_lua();
    let probe: mlua::Function = lua
        .load("return function(f, d) pcall(struct.size, f) pcall(struct.unpack, f, d) pcall(struct.pack, f, 1, 'ab', 2.5, 'c', 3) end")
        .eval()
        .unwrap();
    let alphabet = b"<>! xbBhHlLTiIcsfd0123456789q\0";
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..20_000 {
        let mut format = Vec::new();
        let mut data = Vec::new();
        for _ in 0..(state % 7) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            format.push(alphabet[(state % alphabet.len() as u64) as usize]);
            data.push((state >> 32) as u8);
        }
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let (format, data) = (lua.create_string(&format).unwrap(), lua.create_string(&data).unwrap());
        probe.call::<()>((format, data)).unwrap();
    }
}

#[test]
fn cmsgpack_never_panics_on_truncated_or_corrupt_input() {
    let lua = plain_lua();
    // Every truncation and every one-byte corruption of a packed value unpacks or
    // raises: no panic, no read past the end.
    let code = "return cmsgpack.pack({1, -200, 70000, 2^40, -2^40, 0.1, 0.5, 'str', string.rep('s', 40),
        {k = {true, false}}, {[1.5] = 'x'}})";
    let packed: mlua::String = lua.load(code).eval().unwrap();
    let packed = packed.as_bytes().to_vec();
    // (Only the verdict comes back to Rust: mlua's `Function::call` cannot take
    // thousands of results.)
    let unpack: mlua::Function = lua
        .load("return function(s) return (pcall(cmsgpack.unpack, s)) end")
        .eval()
        .unwrap();
    for end in 0..packed.len() {
        let ok: bool = unpack.call(lua.create_string(&packed[..end]).unwrap()).unwrap();
        assert!(!ok || end == 0, "a prefix of {end} bytes unpacked");
    }
    for at in 0..packed.len() {
        for byte in 0..=255u8 {
            let mut corrupt = packed.clone();
            corrupt[at] = byte;
            let _: bool = unpack.call(lua.create_string(&corrupt).unwrap()).unwrap();
        }
    }
}
