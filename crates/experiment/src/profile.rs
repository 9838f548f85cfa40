//! A machine profile: the costs `ferry calibrate` measured on one machine, in the model's
//! terms, so the simulator can be run as that machine instead of the paper-scale defaults.
//!
//! The file is JSON with a format version ([`PROFILE_VERSION`]); every value is checked
//! against the model's own limits when it is loaded, so a profile that loads is one the
//! simulator accepts. Applying a profile replaces the model's CPU costs, RTT and stalls;
//! it leaves the cluster's shape (nodes, cores), the links and the message header alone.
//! Command-line flags given explicitly are applied after it and win.

use std::path::{Path, PathBuf};

use ferry_control::Nanos;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::model::{
    ClusterModel, BYTE_COST_NS_MAX, MSG_COST_MAX, RTT_MAX, STALL_MEAN_MAX, STALL_RATE_HZ_MAX,
    STORAGE_COMPUTE_FACTOR_MAX,
};

/// The profile format this build reads and writes. Raised when a field changes meaning, so
/// an old file is refused with a clear message instead of being misread.
pub const PROFILE_VERSION: u64 = 1;

/// What the `format` field of every profile says, so a stray JSON file is told apart.
pub const PROFILE_FORMAT: &str = "ferry-profile";

/// Longest free-text field accepted (where, when, notes): a profile is a small file, and a
/// megabyte of "notes" is a wrong file.
pub const TEXT_BYTES_MAX: usize = 4_096;

/// Most notes a profile may carry.
pub const NOTES_MAX: usize = 64;

/// What a field of the file holds, for errors that name the field.
#[derive(Clone, Copy)]
enum FieldKind {
    /// A whole number of nanoseconds.
    Nanos,
    /// Any number.
    Number,
    /// Free text.
    Text,
}

impl FieldKind {
    fn what(self) -> &'static str {
        match self {
            FieldKind::Nanos => "a whole, non-negative number of nanoseconds",
            FieldKind::Number => "a number",
            FieldKind::Text => "a string",
        }
    }
}

/// Every field a profile must have (beyond `format`, `version` and the optional `notes`),
/// and its kind.
const FIELDS: [(&str, FieldKind); 13] = [
    ("measured_on", FieldKind::Text),
    ("measured_at", FieldKind::Text),
    ("rtt_ns", FieldKind::Nanos),
    ("app_msg_ns", FieldKind::Nanos),
    ("app_invoke_ns", FieldKind::Nanos),
    ("app_byte_ns", FieldKind::Number),
    ("storage_msg_ns", FieldKind::Nanos),
    ("storage_invoke_ns", FieldKind::Nanos),
    ("storage_get_ns", FieldKind::Nanos),
    ("storage_byte_ns", FieldKind::Number),
    ("storage_compute_factor", FieldKind::Number),
    ("stall_rate_hz", FieldKind::Number),
    ("stall_mean_ns", FieldKind::Nanos),
];

/// One machine's measured costs (see the module docs). Times are nanoseconds of one core.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Always [`PROFILE_FORMAT`]: says what the file is.
    pub format: String,
    /// The format version, [`PROFILE_VERSION`].
    pub version: u64,
    /// Where it was measured (host, CPUs of each side), free text for the reader.
    pub measured_on: String,
    /// When it was measured, free text (UTC).
    pub measured_at: String,
    /// Unloaded round trip of the network and both stacks, without either side's CPU.
    pub rtt_ns: u64,
    /// App CPU per message handled (a send or a receive).
    pub app_msg_ns: u64,
    /// App CPU to start a function locally, beyond its first message.
    pub app_invoke_ns: u64,
    /// App CPU per payload byte received.
    pub app_byte_ns: f64,
    /// Storage CPU per request message handled (receive, parse, reply).
    pub storage_msg_ns: u64,
    /// Storage CPU to dispatch an invocation to its function.
    pub storage_invoke_ns: u64,
    /// Storage CPU per table lookup (a get, or an access inside a function).
    pub storage_get_ns: u64,
    /// Storage CPU per payload byte sent.
    pub storage_byte_ns: f64,
    /// Function compute on the storage node over the same compute on the app node.
    pub storage_compute_factor: f64,
    /// Node-wide stalls per second, per node.
    pub stall_rate_hz: f64,
    /// Mean length of one stall.
    pub stall_mean_ns: u64,
    /// Spread of the stalls' lengths, standard deviation over mean, in [0, 1]; optional,
    /// 1 (exponential) in profiles written before it was measured.
    #[serde(default = "stall_length_cv_default")]
    pub stall_length_cv: f64,
    /// What the measurement had to adjust (a negative slope clamped to 0, say), for the reader.
    #[serde(default)]
    pub notes: Vec<String>,
}

fn stall_length_cv_default() -> f64 {
    crate::model::STALL_LENGTH_CV_DEFAULT
}

/// Why a profile cannot be used.
#[derive(Debug, Error)]
pub enum ProfileError {
    /// The file cannot be read (missing, unreadable).
    #[error("cannot read profile {path}: {source} (write one with `ferry calibrate --out FILE`)")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not JSON, or not a JSON object.
    #[error("profile {path} is not a JSON profile: {detail}")]
    NotJson {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        detail: String,
    },
    /// The file is a profile of another format version (or no profile at all).
    #[error(
        "profile {path} has format {format:?} version {version}; this ferry reads {PROFILE_FORMAT:?} \
         version {PROFILE_VERSION} (re-run `ferry calibrate`)"
    )]
    Version {
        /// The file.
        path: PathBuf,
        /// Its `format` field ("" if none).
        format: String,
        /// Its `version` field ("none" if none).
        version: String,
    },
    /// A field is missing, unknown or of the wrong type.
    #[error("profile {path}: {detail}")]
    Field {
        /// The file.
        path: PathBuf,
        /// What the parser said (names the field).
        detail: String,
    },
    /// A value lies outside what the model supports.
    #[error("profile {path}: {field} = {value} is outside {range}")]
    OutOfRange {
        /// The file.
        path: PathBuf,
        /// The field.
        field: &'static str,
        /// The allowed range.
        range: &'static str,
        /// The rejected value.
        value: String,
    },
}

/// Why a profile's values are unusable, before a path is known (see [`Profile::check`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeError {
    /// The field.
    pub field: &'static str,
    /// The allowed range.
    pub range: &'static str,
    /// The rejected value.
    pub value: String,
}

impl std::fmt::Display for RangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} = {} is outside {}", self.field, self.value, self.range)
    }
}

impl std::error::Error for RangeError {}

impl Profile {
    /// Checks every value against the model's limits (the same ones `ferry sim` applies to
    /// its flags), and the free text against its size limits.
    pub fn check(&self) -> Result<(), RangeError> {
        let err = |field, range, value: String| Err(RangeError { field, range, value });
        if self.rtt_ns > RTT_MAX.0 {
            return err("rtt_ns", "[0, 1s]", self.rtt_ns.to_string());
        }
        for (field, v) in [
            ("app_msg_ns", self.app_msg_ns),
            ("app_invoke_ns", self.app_invoke_ns),
            ("storage_msg_ns", self.storage_msg_ns),
            ("storage_invoke_ns", self.storage_invoke_ns),
            ("storage_get_ns", self.storage_get_ns),
        ] {
            if v > MSG_COST_MAX.0 {
                return err(field, "[0, 10ms]", v.to_string());
            }
        }
        for (field, v) in [
            ("app_byte_ns", self.app_byte_ns),
            ("storage_byte_ns", self.storage_byte_ns),
        ] {
            if !(0.0..=BYTE_COST_NS_MAX).contains(&v) {
                return err(field, "[0, 100] ns per byte", v.to_string());
            }
        }
        if !(0.0..=STORAGE_COMPUTE_FACTOR_MAX).contains(&self.storage_compute_factor) {
            return err(
                "storage_compute_factor",
                "[0, 100]",
                self.storage_compute_factor.to_string(),
            );
        }
        if !(0.0..=STALL_RATE_HZ_MAX).contains(&self.stall_rate_hz) {
            return err("stall_rate_hz", "[0, 100000]", self.stall_rate_hz.to_string());
        }
        if self.stall_mean_ns > STALL_MEAN_MAX.0 {
            return err("stall_mean_ns", "[0, 10ms]", self.stall_mean_ns.to_string());
        }
        if !(0.0..=1.0).contains(&self.stall_length_cv) {
            return err("stall_length_cv", "[0, 1]", self.stall_length_cv.to_string());
        }
        let texts = [&self.measured_on, &self.measured_at].into_iter().chain(&self.notes);
        if let Some(long) = texts.into_iter().find(|t| t.len() > TEXT_BYTES_MAX) {
            return err("a text field", "4096 bytes", format!("{} bytes", long.len()));
        }
        if self.notes.len() > NOTES_MAX {
            return err("notes", "[0, 64] notes", self.notes.len().to_string());
        }
        Ok(())
    }

    /// Makes `cluster` this machine: its CPU costs, RTT and stalls. Cores, nodes, links
    /// and the header size stay as they are.
    pub fn apply(&self, cluster: &mut ClusterModel) {
        let c = &mut cluster.costs;
        c.app_msg_ns = self.app_msg_ns;
        c.app_invoke_ns = self.app_invoke_ns;
        c.app_byte_ns = self.app_byte_ns;
        c.storage_msg_ns = self.storage_msg_ns;
        c.storage_invoke_ns = self.storage_invoke_ns;
        c.storage_get_ns = self.storage_get_ns;
        c.storage_byte_ns = self.storage_byte_ns;
        c.storage_compute_factor = self.storage_compute_factor;
        cluster.rtt = Nanos(self.rtt_ns);
        cluster.stall_rate_hz = self.stall_rate_hz;
        cluster.stall_mean = Nanos(self.stall_mean_ns);
        cluster.stall_length_cv = self.stall_length_cv;
    }

    /// The profile as the pretty JSON `ferry calibrate` writes.
    pub fn to_json(&self) -> String {
        // Invariant: the profile holds only strings, integers and finite floats (checked).
        serde_json::to_string_pretty(self).expect("a profile serialises")
    }

    /// Parses a profile from `text`; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Profile, ProfileError> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| ProfileError::NotJson {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        let Some(object) = value.as_object() else {
            return Err(ProfileError::NotJson {
                path: path.to_path_buf(),
                detail: "the top level is not an object".into(),
            });
        };
        let format = object.get("format").and_then(|f| f.as_str()).unwrap_or("");
        let version = object.get("version").and_then(|v| v.as_u64());
        if format != PROFILE_FORMAT || version != Some(PROFILE_VERSION) {
            return Err(ProfileError::Version {
                path: path.to_path_buf(),
                format: format.to_string(),
                version: version.map_or("none".to_string(), |v| v.to_string()),
            });
        }
        let field_err = |detail: String| ProfileError::Field {
            path: path.to_path_buf(),
            detail,
        };
        for (field, kind) in FIELDS {
            let Some(v) = object.get(field) else {
                return Err(field_err(format!("missing field `{field}`")));
            };
            let ok = match kind {
                FieldKind::Nanos => v.is_u64(),
                FieldKind::Number => v.is_number(),
                FieldKind::Text => v.is_string(),
            };
            if !ok {
                return Err(field_err(format!("`{field}` = {v} is not {}", kind.what())));
            }
        }
        let profile: Profile = serde_json::from_value(value).map_err(|e| ProfileError::Field {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        profile.check().map_err(|e| ProfileError::OutOfRange {
            path: path.to_path_buf(),
            field: e.field,
            range: e.range,
            value: e.value,
        })?;
        Ok(profile)
    }
}

/// Reads and checks the profile at `path`.
pub fn load(path: &Path) -> Result<Profile, ProfileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    Profile::parse(&text, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Profile {
        Profile {
            format: PROFILE_FORMAT.into(),
            version: PROFILE_VERSION,
            measured_on: "test host, node on CPU 0, app on CPU 1".into(),
            measured_at: "2026-01-01 00:00 UTC".into(),
            rtt_ns: 40_000,
            app_msg_ns: 3_000,
            app_invoke_ns: 900,
            app_byte_ns: 0.05,
            storage_msg_ns: 2_500,
            storage_invoke_ns: 1_200,
            storage_get_ns: 300,
            storage_byte_ns: 0.02,
            storage_compute_factor: 1.0,
            stall_rate_hz: 2.5,
            stall_mean_ns: 3_000_000,
            stall_length_cv: 0.3,
            notes: vec![],
        }
    }

    #[test]
    fn a_profile_round_trips_and_makes_the_cluster_that_machine() {
        let p = sample();
        let again = Profile::parse(&p.to_json(), Path::new("p.json")).unwrap();
        assert_eq!(again, p);
        let mut cl = ClusterModel {
            app_cores: 3,
            ..ClusterModel::default()
        };
        p.apply(&mut cl);
        assert_eq!(cl.app_cores, 3, "the shape stays");
        assert_eq!(cl.rtt, Nanos::from_us(40));
        assert_eq!(cl.costs.storage_msg_ns, 2_500);
        assert_eq!(cl.costs.app_byte_ns, 0.05);
        assert_eq!(cl.stall_mean, Nanos::from_ms(3));
        assert_eq!(cl.stall_length_cv, 0.3);
        assert!(cl.validate().is_ok());
    }

    #[test]
    fn a_profile_without_the_stalls_spread_has_exponential_stalls() {
        let mut v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        v.as_object_mut().unwrap().remove("stall_length_cv");
        let p = Profile::parse(&v.to_string(), Path::new("old.json")).unwrap();
        assert_eq!(p.stall_length_cv, crate::model::STALL_LENGTH_CV_DEFAULT);
    }

    #[test]
    fn bad_profiles_say_what_is_wrong() {
        let path = Path::new("p.json");
        let msg = |text: &str| Profile::parse(text, path).unwrap_err().to_string();
        assert!(msg("{not json").contains("is not a JSON profile"));
        assert!(msg("[1, 2]").contains("top level is not an object"));
        assert!(msg(r#"{"format": "ferry-profile", "version": 7}"#).contains("version 7; this ferry reads"));
        assert!(msg(r#"{"rtt_ns": 5}"#).contains("format \"\" version none"));
        let mut v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        v.as_object_mut().unwrap().remove("storage_get_ns");
        assert!(msg(&v.to_string()).contains("missing field `storage_get_ns`"));
        let mut v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        v["app_msg_ns"] = serde_json::json!(-4);
        assert!(msg(&v.to_string()).contains("app_msg_ns"));
        let mut v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        v["rtt_nss"] = serde_json::json!(4);
        assert!(msg(&v.to_string()).contains("unknown field `rtt_nss`"));
        for (field, value, needle) in [
            (
                "rtt_ns",
                serde_json::json!(2_000_000_000u64),
                "rtt_ns = 2000000000 is outside [0, 1s]",
            ),
            ("storage_msg_ns", serde_json::json!(20_000_000u64), "storage_msg_ns"),
            (
                "app_byte_ns",
                serde_json::json!(-0.5),
                "app_byte_ns = -0.5 is outside [0, 100] ns per byte",
            ),
            (
                "storage_compute_factor",
                serde_json::json!(1000.0),
                "storage_compute_factor",
            ),
            ("stall_rate_hz", serde_json::json!(1e7), "stall_rate_hz"),
            ("stall_mean_ns", serde_json::json!(1u64 << 40), "stall_mean_ns"),
            ("stall_length_cv", serde_json::json!(1.5), "stall_length_cv"),
        ] {
            let mut v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
            v[field] = value;
            let m = msg(&v.to_string());
            assert!(m.contains(needle) && m.starts_with("profile p.json"), "{field}: {m}");
        }
        let missing = load(Path::new("/nonexistent/ferry-profile.json")).unwrap_err();
        assert!(matches!(missing, ProfileError::Read { .. }), "{missing}");
        assert!(missing
            .to_string()
            .contains("cannot read profile /nonexistent/ferry-profile.json"));
    }
}
