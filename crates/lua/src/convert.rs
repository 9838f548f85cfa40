//! Values between Lua and Redis replies, by Redis's rules for scripts:
//!
//! | reply            | Lua                          |
//! |------------------|------------------------------|
//! | integer          | integer                      |
//! | bulk string      | string                       |
//! | null             | `false`                      |
//! | array            | table (array part)           |
//! | status `+OK`     | table `{ok = "OK"}`          |
//! | error `-ERR x`   | table `{err = "ERR x"}`      |
//!
//! After `redis.setresp(3)` a script sees RESP3's types as Redis gives them: a map is
//! `{map = {field = value, …}}`, a double `{double = n}` (a string under RESP2), pairs
//! (ZRANGE WITHSCORES) a table of two-element tables (flat under RESP2), and null `nil`.
//!
//! and back: a number is truncated to an integer, `true` is 1, `false` and `nil` are null,
//! a table is an error or status if it has `err` or `ok`, a map if it has `map`, a set
//! (sent as an array) if it has `set`, a double if it has `double`,
//! otherwise an array of its elements up to the first `nil`.

use bytes::Bytes;
use mlua::{Lua, Table, Value};

use ferry_resp::decode::MAX_REPLY_DEPTH;
use ferry_resp::Reply;

/// A reply as the Lua value `redis.call` returns: RESP2's conversions, or RESP3's with
/// `resp3` (the script called `redis.setresp(3)`).
pub fn reply_to_lua(lua: &Lua, reply: &Reply, resp3: bool) -> mlua::Result<Value> {
    Ok(match reply {
        Reply::Integer(n) => Value::Integer(*n),
        Reply::Bulk(bytes) => Value::String(lua.create_string(bytes)?),
        Reply::Null | Reply::NullArray if resp3 => Value::Nil,
        // Redis converts both RESP2 nulls to false.
        Reply::Null | Reply::NullArray => Value::Boolean(false),
        Reply::Simple(text) => {
            let table = lua.create_table()?;
            table.raw_set("ok", text.as_str())?;
            Value::Table(table)
        }
        Reply::Error(text) => {
            let table = lua.create_table()?;
            table.raw_set("err", text.as_str())?;
            Value::Table(table)
        }
        Reply::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                table.raw_set(i + 1, reply_to_lua(lua, item, resp3)?)?;
            }
            Value::Table(table)
        }
        Reply::Double(value) if resp3 => {
            let table = lua.create_table()?;
            table.raw_set("double", *value)?;
            Value::Table(table)
        }
        Reply::Double(value) => Value::String(lua.create_string(ferry_resp::reply::format_double(*value))?),
        Reply::Pairs(pairs) => {
            // RESP3: one two-element table per pair; RESP2: flat.
            let table = lua.create_table_with_capacity(pairs.len() * 2, 0)?;
            for (i, (first, second)) in pairs.iter().enumerate() {
                let (first, second) = (reply_to_lua(lua, first, resp3)?, reply_to_lua(lua, second, resp3)?);
                if resp3 {
                    table.raw_set(i + 1, lua.create_sequence_from([first, second])?)?;
                } else {
                    table.raw_set(2 * i + 1, first)?;
                    table.raw_set(2 * i + 2, second)?;
                }
            }
            Value::Table(table)
        }
        Reply::Map(pairs) if resp3 => {
            let map = lua.create_table_with_capacity(0, pairs.len())?;
            for (key, value) in pairs {
                map.raw_set(reply_to_lua(lua, key, resp3)?, reply_to_lua(lua, value, resp3)?)?;
            }
            let table = lua.create_table()?;
            table.raw_set("map", map)?;
            Value::Table(table)
        }
        Reply::Map(pairs) => {
            // RESP2's flat form, as Redis gives scripts by default.
            let table = lua.create_table_with_capacity(pairs.len() * 2, 0)?;
            for (i, (key, value)) in pairs.iter().enumerate() {
                table.raw_set(2 * i + 1, reply_to_lua(lua, key, resp3)?)?;
                table.raw_set(2 * i + 2, reply_to_lua(lua, value, resp3)?)?;
            }
            Value::Table(table)
        }
    })
}

/// A function's return value as the reply sent to the caller.
pub fn lua_to_reply(value: &Value) -> Reply {
    to_reply(value, 0)
}

fn to_reply(value: &Value, depth: usize) -> Reply {
    match value {
        Value::Nil | Value::Boolean(false) => Reply::Null,
        Value::Boolean(true) => Reply::Integer(1),
        Value::Integer(n) => Reply::Integer(*n),
        Value::Number(n) => Reply::Integer(*n as i64),
        Value::String(s) => Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Table(table) => table_to_reply(table, depth),
        _ => Reply::Null,
    }
}

fn table_to_reply(table: &Table, depth: usize) -> Reply {
    if let Ok(Value::String(err)) = table.raw_get::<Value>("err") {
        return Reply::Error(err.to_string_lossy());
    }
    if let Ok(Value::String(ok)) = table.raw_get::<Value>("ok") {
        return Reply::Simple(ok.to_string_lossy());
    }
    if depth >= MAX_REPLY_DEPTH {
        // Redis's words where its conversion runs out of Lua stack: the levels above stay
        // arrays, and a self-referencing table ends in this error at the bottom.
        return Reply::err("reached lua stack limit");
    }
    if let Ok(Value::Table(map)) = table.raw_get::<Value>("map") {
        let pairs = map.pairs::<Value, Value>().filter_map(Result::ok);
        return Reply::Map(
            pairs
                .map(|(key, value)| (to_reply(&key, depth + 1), to_reply(&value, depth + 1)))
                .collect(),
        );
    }
    if let Ok(Value::Table(set)) = table.raw_get::<Value>("set") {
        let members = set.pairs::<Value, Value>().filter_map(Result::ok);
        return Reply::Array(members.map(|(member, _)| to_reply(&member, depth + 1)).collect());
    }
    if let Ok(Value::Number(double)) = table.raw_get::<Value>("double") {
        return Reply::Double(double);
    }
    if let Ok(Value::Integer(double)) = table.raw_get::<Value>("double") {
        return Reply::Double(double as f64);
    }
    let mut items = Vec::new();
    for i in 1.. {
        match table.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(value) => items.push(to_reply(&value, depth + 1)),
        }
    }
    Reply::Array(items)
}

/// One argument of `redis.call`: strings and numbers, as Redis accepts them.
pub fn command_arg(value: &Value) -> Option<Bytes> {
    match value {
        Value::String(s) => Some(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Integer(n) => Some(Bytes::from(n.to_string())),
        Value::Number(n) => Some(Bytes::from(format_number(*n))),
        _ => None,
    }
}

/// A float as Lua's `%.14g` prints it, so `redis.call('SET', k, 1.5)` stores "1.5".
fn format_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_round_trip_through_lua_by_redis_rules() {
        let lua = Lua::new();
        let reply = Reply::Array(vec![
            Reply::Integer(3),
            Reply::text("v"),
            Reply::ok(),
            Reply::Error("ERR no".into()),
        ]);
        let value = reply_to_lua(&lua, &reply, false).unwrap();
        assert_eq!(lua_to_reply(&value), reply);
        // Null becomes false and ends an array (Redis's behaviour).
        let value = reply_to_lua(&lua, &Reply::Array(vec![Reply::Null, Reply::Integer(1)]), false).unwrap();
        assert_eq!(lua_to_reply(&value), Reply::Array(vec![Reply::Null, Reply::Integer(1)]));
        let from_lua = |code: &str| lua_to_reply(&lua.load(code).eval::<Value>().unwrap());
        assert_eq!(from_lua("return 3.9"), Reply::Integer(3));
        assert_eq!(from_lua("return true"), Reply::Integer(1));
        assert_eq!(from_lua("return nil"), Reply::Null);
        assert_eq!(
            from_lua("return {1, 2, nil, 4}"),
            Reply::Array(vec![Reply::Integer(1), Reply::Integer(2)])
        );
        assert_eq!(from_lua("return {err = 'ERR x'}"), Reply::Error("ERR x".into()));
        let deep = lua
            .load("local t = {} local c = t for i = 1, 100 do c[1] = {} c = c[1] end return t")
            .eval::<Value>()
            .unwrap();
        assert!(format!("{:?}", lua_to_reply(&deep)).contains("reached lua stack limit"));
    }

    #[test]
    fn under_resp3_a_map_is_a_map_table_and_null_is_nil() {
        let lua = Lua::new();
        let map = Reply::Map(vec![(Reply::text("f"), Reply::text("v"))]);
        let value = reply_to_lua(&lua, &map, true).unwrap();
        let Value::Table(table) = &value else { panic!("a table") };
        let inner: Table = table.raw_get("map").unwrap();
        assert_eq!(inner.raw_get::<String>("f").unwrap(), "v");
        assert_eq!(lua_to_reply(&value), map);
        assert_eq!(reply_to_lua(&lua, &Reply::Null, true).unwrap(), Value::Nil);
        // RESP2 keeps the flat form.
        assert_eq!(
            lua_to_reply(&reply_to_lua(&lua, &map, false).unwrap()),
            Reply::Array(vec![Reply::text("f"), Reply::text("v")])
        );
        let from_lua = |code: &str| lua_to_reply(&lua.load(code).eval::<Value>().unwrap());
        assert_eq!(from_lua("return {double = 1.5}"), Reply::Double(1.5));
        let scores = Reply::Pairs(vec![(Reply::text("m"), Reply::Double(2.5))]);
        assert_eq!(
            lua_to_reply(&reply_to_lua(&lua, &scores, false).unwrap()),
            Reply::Array(vec![Reply::text("m"), Reply::text("2.5")])
        );
        assert_eq!(
            lua_to_reply(&reply_to_lua(&lua, &scores, true).unwrap()),
            Reply::Array(vec![Reply::Array(vec![Reply::text("m"), Reply::Double(2.5)])])
        );
        assert_eq!(
            from_lua("return {set = {a = true}}"),
            Reply::Array(vec![Reply::text("a")])
        );
    }

    #[test]
    fn command_arguments_are_strings_or_numbers() {
        let lua = Lua::new();
        assert_eq!(command_arg(&Value::Integer(-4)), Some(Bytes::from_static(b"-4")));
        assert_eq!(command_arg(&Value::Number(1.5)), Some(Bytes::from_static(b"1.5")));
        assert_eq!(command_arg(&Value::Number(2.0)), Some(Bytes::from_static(b"2")));
        let s = Value::String(lua.create_string("k").unwrap());
        assert_eq!(command_arg(&s), Some(Bytes::from_static(b"k")));
        assert_eq!(command_arg(&Value::Boolean(true)), None);
        assert_eq!(command_arg(&Value::Nil), None);
    }
}
