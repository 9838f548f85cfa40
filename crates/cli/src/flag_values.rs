//! The values of flags and config file keys: durations and SLOs in one grammar
//! (`ferry_spec`'s, `10us`, `1.5ms`, `5s`) and choices by the names their types give
//! them, each read by clap at the flag and by serde in a config file, so a bad value is
//! refused, naming its flag or key, before any command runs.

use std::time::Duration;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use ferry_control::Nanos;

/// A human duration (`10us`, `1.5ms`, `5s`).
pub fn duration(text: &str) -> Result<Duration, String> {
    nanos(text).map(|nanos| Duration::from_nanos(nanos.as_nanos()))
}

/// A human duration in the simulator's unit.
pub fn nanos(text: &str) -> Result<Nanos, String> {
    ferry_spec::parse_duration(text).map_err(|err| err.to_string())
}

/// A latency SLO: a duration above zero.
pub fn slo(text: &str) -> Result<Duration, String> {
    let slo = duration(text)?;
    if slo.is_zero() {
        return Err("an SLO must be positive".into());
    }
    Ok(slo)
}

/// A setting picked by name from a fixed list; the names live with the type.
pub trait Choice: Copy + Send + Sync + 'static {
    /// Every value, in the order `--help` lists them.
    const ALL: &'static [Self];

    /// The value's name on the command line and in a config file.
    fn name(self) -> &'static str;

    /// The value of a name, if it is one.
    fn named(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|value| value.name() == name)
    }

    /// The names, for messages.
    fn names() -> String {
        Self::ALL
            .iter()
            .map(|value| value.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Choice for ferry_wal::FsyncMode {
    const ALL: &'static [Self] = &ferry_wal::FsyncMode::ALL;

    fn name(self) -> &'static str {
        ferry_wal::FsyncMode::name(self)
    }
}

impl Choice for ferry_server::Ack {
    const ALL: &'static [Self] = &ferry_server::Ack::ALL;

    fn name(self) -> &'static str {
        ferry_server::Ack::name(self)
    }
}

/// clap's parser of a choice flag: `--help` lists the names, a wrong one is refused.
pub fn choice<T: Choice>() -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(T::ALL.iter().map(|value| value.name()))
        .try_map(|name: String| T::named(&name).ok_or_else(|| format!("one of {}", T::names())))
}

/// A config file's duration (`invoke_budget = "100ms"`), written back in nanoseconds.
pub mod duration_text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Option<Duration>, serializer: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(duration) => serializer.serialize_some(&format!("{}ns", duration.as_nanos())),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Duration>, D::Error> {
        Option::<String>::deserialize(deserializer)?
            .map(|text| super::duration(&text).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// A config file's choice (`fsync = "always"`), by the type's names.
pub mod choice_name {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::Choice;

    pub fn serialize<S: Serializer, T: Choice>(value: &Option<T>, serializer: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(value) => serializer.serialize_some(value.name()),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: Choice>(deserializer: D) -> Result<Option<T>, D::Error> {
        Option::<String>::deserialize(deserializer)?
            .map(|name| {
                T::named(&name)
                    .ok_or_else(|| serde::de::Error::custom(format!("unknown value {name:?}: one of {}", T::names())))
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_wal::FsyncMode;

    #[test]
    fn durations_and_slos_are_read_in_one_grammar() {
        assert_eq!(duration("1.5ms").unwrap(), Duration::from_micros(1_500));
        assert_eq!(nanos("10us").unwrap(), Nanos::from_us(10));
        assert!(duration("10").unwrap_err().contains("no unit"), "a unit is required");
        assert_eq!(slo("5ms").unwrap(), Duration::from_millis(5));
        assert!(slo("0s").unwrap_err().contains("positive"));
    }

    #[test]
    fn a_choice_is_read_by_the_names_its_type_gives() {
        assert_eq!(FsyncMode::named("everysec"), Some(FsyncMode::EverySec));
        assert_eq!(FsyncMode::named("sometimes"), None);
        assert_eq!(FsyncMode::names(), "always, everysec, no");
        let command = clap::Command::new("t").arg(
            clap::Arg::new("fsync")
                .long("fsync")
                .value_parser(choice::<FsyncMode>()),
        );
        let matches = command.clone().try_get_matches_from(["t", "--fsync", "no"]).unwrap();
        assert_eq!(matches.get_one::<FsyncMode>("fsync"), Some(&FsyncMode::No));
        let err = command
            .try_get_matches_from(["t", "--fsync", "never"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("always, everysec, no"), "{err}");
    }

    #[test]
    fn a_duration_in_a_config_file_reads_back_what_it_wrote() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Settings {
            #[serde(default, with = "duration_text")]
            budget: Option<Duration>,
            #[serde(default, with = "choice_name")]
            fsync: Option<FsyncMode>,
        }
        let read: Settings = toml::from_str("budget = \"1.5ms\"\nfsync = \"always\"").unwrap();
        assert_eq!(read.budget, Some(Duration::from_micros(1_500)));
        assert_eq!(read.fsync, Some(FsyncMode::Always));
        let again: Settings = serde_json::from_value(serde_json::to_value(&read).unwrap()).unwrap();
        assert_eq!(again, read);
        let err = toml::from_str::<Settings>("fsync = \"never\"").unwrap_err().to_string();
        assert!(err.contains("one of always, everysec, no"), "{err}");
    }
}
