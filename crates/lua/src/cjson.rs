//! The `cjson` library Redis preloads for scripts (`cjson.encode`, `cjson.decode`,
//! `cjson.null`), over serde_json, with lua-cjson's rules: a table whose keys are exactly
//! 1..n is an array, any other table an object (an empty one `{}`), numbers are written as
//! `%.14g`, JSON null reads as `cjson.null`, and nesting is bounded.

use mlua::{LightUserData, Lua, Table, Value};
use serde_json::{Map, Number, Value as Json};

/// Deepest nesting encode and decode follow (lua-cjson's default is 1000; a script's
/// data is far shallower, and this bounds the recursion).
pub const MAX_JSON_DEPTH: usize = 128;

/// `cjson.null`: the light userdata lua-cjson uses for JSON null.
fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// The `cjson` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let cjson = lua.create_table()?;
    cjson.set(
        "encode",
        lua.create_function(|_, value: Value| {
            let json = to_json(&value, 0).map_err(mlua::Error::runtime)?;
            serde_json::to_string(&json).map_err(|err| mlua::Error::runtime(format!("Cannot serialise: {err}")))
        })?,
    )?;
    cjson.set(
        "decode",
        lua.create_function(|lua, text: mlua::String| {
            let json: Json = serde_json::from_slice(&text.as_bytes())
                .map_err(|err| mlua::Error::runtime(format!("Expected value but found invalid token: {err}")))?;
            if depth_of(&json) > MAX_JSON_DEPTH {
                return Err(mlua::Error::runtime("Found too many nested data structures"));
            }
            to_lua(lua, &json)
        })?,
    )?;
    cjson.set("null", null())?;
    Ok(cjson)
}

fn to_json(value: &Value, depth: usize) -> Result<Json, String> {
    if depth > MAX_JSON_DEPTH {
        return Err("Cannot serialise, excessive nesting".into());
    }
    Ok(match value {
        Value::Nil => Json::Null,
        Value::LightUserData(data) if data.0.is_null() => Json::Null,
        Value::Boolean(b) => Json::Bool(*b),
        Value::Integer(n) => Json::Number((*n).into()),
        Value::Number(n) => number(*n)?,
        Value::String(s) => Json::String(s.to_string_lossy()),
        Value::Table(table) => table_to_json(table, depth)?,
        other => return Err(format!("Cannot serialise {}: type not supported", other.type_name())),
    })
}

/// A float as lua-cjson writes it (`%.14g`): integral values without a fraction.
fn number(n: f64) -> Result<Json, String> {
    if !n.is_finite() {
        return Err("Cannot serialise number: must not be NaN or Infinity".into());
    }
    if n.fract() == 0.0 && n.abs() < 1e15 {
        return Ok(Json::Number((n as i64).into()));
    }
    let rounded: f64 = format!("{n:.13e}").parse().unwrap_or(n);
    Number::from_f64(rounded)
        .map(Json::Number)
        .ok_or_else(|| "Cannot serialise number".into())
}

fn table_to_json(table: &Table, depth: usize) -> Result<Json, String> {
    let mut entries = Vec::new();
    for pair in table.pairs::<Value, Value>() {
        entries.push(pair.map_err(|err| err.to_string())?);
    }
    let length = entries.len();
    let is_array = length > 0
        && entries
            .iter()
            .all(|(key, _)| matches!(key, Value::Integer(i) if *i >= 1 && (*i as usize) <= length));
    if is_array {
        let mut items = vec![Json::Null; length];
        for (key, value) in &entries {
            if let Value::Integer(i) = key {
                items[*i as usize - 1] = to_json(value, depth + 1)?;
            }
        }
        return Ok(Json::Array(items));
    }
    let mut object = Map::new();
    for (key, value) in &entries {
        let name = match key {
            Value::String(s) => s.to_string_lossy(),
            Value::Integer(i) => i.to_string(),
            Value::Number(n) => n.to_string(),
            _ => return Err("Cannot serialise table: table key must be a number or string".into()),
        };
        object.insert(name, to_json(value, depth + 1)?);
    }
    Ok(Json::Object(object))
}

fn depth_of(json: &Json) -> usize {
    // Iterative, so hostile input cannot overflow the stack here either.
    let mut deepest = 0;
    let mut pending = vec![(json, 1)];
    while let Some((value, depth)) = pending.pop() {
        deepest = deepest.max(depth);
        if depth > MAX_JSON_DEPTH {
            break;
        }
        match value {
            Json::Array(items) => pending.extend(items.iter().map(|item| (item, depth + 1))),
            Json::Object(fields) => pending.extend(fields.values().map(|item| (item, depth + 1))),
            _ => {}
        }
    }
    deepest
}

fn to_lua(lua: &Lua, json: &Json) -> mlua::Result<Value> {
    Ok(match json {
        Json::Null => null(),
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Integer(i),
            None => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::String(lua.create_string(s)?),
        Json::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                table.raw_set(i + 1, to_lua(lua, item)?)?;
            }
            Value::Table(table)
        }
        Json::Object(fields) => {
            let table = lua.create_table_with_capacity(0, fields.len())?;
            for (name, item) in fields {
                table.raw_set(name.as_str(), to_lua(lua, item)?)?;
            }
            Value::Table(table)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(code: &str) -> String {
        let lua = Lua::new();
        lua.globals().set("cjson", library(&lua).unwrap()).unwrap();
        lua.load(code).eval::<String>().unwrap()
    }

    #[test]
    fn encodes_and_decodes_as_lua_cjson_does() {
        assert_eq!(run("return cjson.encode({1, 2, 'three'})"), "[1,2,\"three\"]");
        assert_eq!(run("return cjson.encode({a = true})"), "{\"a\":true}");
        assert_eq!(run("return cjson.encode({})"), "{}");
        assert_eq!(run("return cjson.encode(1.5)"), "1.5");
        assert_eq!(
            run("return cjson.encode({[1] = 'a', [3] = 'c'})"),
            "{\"1\":\"a\",\"3\":\"c\"}"
        );
        assert_eq!(
            run("local t = cjson.decode('[1,{\"k\":[2.5]}]') return tostring(t[2].k[1])"),
            "2.5"
        );
        assert_eq!(
            run("return tostring(cjson.decode('{\"n\":null}').n == cjson.null)"),
            "true"
        );
        assert_eq!(
            run("return cjson.encode(cjson.decode('{\"a\":[1,2]}'))"),
            "{\"a\":[1,2]}"
        );
    }

    #[test]
    fn bad_json_and_deep_nesting_are_errors_not_crashes() {
        let lua = Lua::new();
        lua.globals().set("cjson", library(&lua).unwrap()).unwrap();
        for code in [
            "return cjson.decode('{nope')",
            "return cjson.encode(function() end)",
            "return cjson.decode(string.rep('[', 100000))",
            "local t = {} t[1] = t return cjson.encode(t)",
            "return cjson.encode(0/0)",
        ] {
            assert!(lua.load(code).eval::<Value>().is_err(), "{code}");
        }
    }
}
