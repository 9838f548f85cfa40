//! A process's settings from its flags over its config file, key by key, for any settings
//! type that clap and serde both read: the file's keys are the flags' names (with `_` for
//! `-`), a flag given wins over the file's key, a repeatable flag adds to the file's list.
//! A key the type does not have, or one only a flag may give, is refused with the file's
//! name.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

/// Largest config file read: settings, not data.
pub const MAX_CONFIG_FILE_BYTES: u64 = 1 << 20;

/// The settings of `flags` over those of the TOML file at `path`. `flag_only` names the
/// keys a file may not give (the file's own path, inherited descriptors).
pub fn layered<T>(flags: &T, path: Option<&Path>, flag_only: &[&str]) -> Result<T, String>
where
    T: Serialize + DeserializeOwned + Default + Clone,
{
    let Some(path) = path else {
        return Ok(flags.clone());
    };
    let file: T = read(path, flag_only)?;
    let mut merged = object(&file)?;
    for (key, flag) in object(flags)? {
        match (flag, merged.get_mut(&key)) {
            // Not given on the command line: the file's value stands.
            (Value::Null | Value::Bool(false), _) => {}
            (Value::Array(flag), Some(Value::Array(file))) => file.extend(flag),
            (flag, _) => {
                merged.insert(key, flag);
            }
        }
    }
    serde_json::from_value(Value::Object(merged)).map_err(|err| format!("{}: {err}", path.display()))
}

/// The keys a settings type has, in its order.
pub fn keys<T: Serialize + Default>() -> Vec<String> {
    object(&T::default())
        .map(|map| map.keys().cloned().collect())
        .unwrap_or_default()
}

/// The file's settings, its keys checked against the type's.
fn read<T>(path: &Path, flag_only: &[&str]) -> Result<T, String>
where
    T: Serialize + DeserializeOwned + Default,
{
    let shown = path.display();
    let size = std::fs::metadata(path)
        .map_err(|err| format!("cannot read {shown}: {err}"))?
        .len();
    if size > MAX_CONFIG_FILE_BYTES {
        return Err(format!(
            "{shown}: {size} bytes, more than a config file may have ({MAX_CONFIG_FILE_BYTES})"
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|err| format!("cannot read {shown}: {err}"))?;
    let table: toml::Table = toml::from_str(&text).map_err(|err| format!("{shown}: {err}"))?;
    let known = keys::<T>();
    for key in table.keys() {
        if flag_only.contains(&key.as_str()) {
            return Err(format!("{shown}: {key} is a flag only (--{})", key.replace('_', "-")));
        }
        if !known.contains(key) {
            return Err(format!("{shown}: {}", unknown(key, &known)));
        }
    }
    toml::from_str(&text).map_err(|err| format!("{shown}: {err}"))
}

/// Why a key is not a setting, with the one it likely meant: the keys with a unit in
/// their name became durations with the unit in their value.
fn unknown(key: &str, known: &[String]) -> String {
    let stem = key.strip_suffix("_ms").or_else(|| key.strip_suffix("_ns"));
    match stem {
        Some(stem) if known.iter().any(|k| k == stem) => {
            format!("unknown setting {key}: it is {stem} now, a duration with its unit (e.g. {stem} = \"100ms\")")
        }
        _ => format!("unknown setting {key} (the settings are the flags of --help, with _ for -)"),
    }
}

fn object<T: Serialize>(value: &T) -> Result<Map<String, Value>, String> {
    match serde_json::to_value(value).map_err(|err| err.to_string())? {
        Value::Object(map) => Ok(map),
        other => Err(format!("settings are a table, not {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, serde::Deserialize, Default, Debug, PartialEq, Clone)]
    #[serde(default)]
    struct Settings {
        listen: Option<String>,
        cores: Option<usize>,
        keep_warm: bool,
        tenant: Vec<String>,
        listen_fd: Option<i32>,
    }

    fn file(text: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }

    #[test]
    fn a_flag_given_wins_and_a_repeated_one_adds_to_the_files_list() {
        let config = file("listen = \"127.0.0.1:1\"\ncores = 2\nkeep_warm = true\ntenant = [\"1:a\"]\n");
        let flags = Settings {
            cores: Some(4),
            tenant: vec!["2:b".into()],
            ..Settings::default()
        };
        let settings = layered(&flags, Some(config.path()), &["listen_fd"]).unwrap();
        assert_eq!(
            settings,
            Settings {
                listen: Some("127.0.0.1:1".into()),
                cores: Some(4),
                keep_warm: true,
                tenant: vec!["1:a".into(), "2:b".into()],
                listen_fd: None,
            }
        );
        assert_eq!(layered(&flags, None, &[]).unwrap(), flags);
    }

    #[test]
    fn a_key_the_settings_do_not_have_is_refused_with_the_file_name() {
        let config = file("cores = 2\ncolour = \"red\"\n");
        let err = layered(&Settings::default(), Some(config.path()), &[]).unwrap_err();
        assert!(err.contains("unknown setting colour"), "{err}");
        let config = file("listen_fd = 3\n");
        let err = layered(&Settings::default(), Some(config.path()), &["listen_fd"]).unwrap_err();
        assert!(err.contains("listen_fd is a flag only (--listen-fd)"), "{err}");
        let config = file("cores = \"two\"\n");
        let err = layered(&Settings::default(), Some(config.path()), &[]).unwrap_err();
        assert!(err.contains("cores"), "the bad key is named: {err}");
        assert!(
            layered(&Settings::default(), Some(Path::new("/nonexistent/ferry.toml")), &[])
                .unwrap_err()
                .contains("cannot read")
        );
    }

    #[test]
    fn a_key_with_its_unit_in_the_name_points_to_the_duration() {
        assert!(unknown("cores_ms", &["cores".into()]).contains("cores = \"100ms\""));
        assert!(unknown("cores_s", &["cores".into()]).contains("the flags of --help"));
    }
}
