//! The grammar of a mix's elements: the presets (`light`, `medium`, `heavy`),
//! `traverse:...` and `task:...` functions, each with an `@` weight, and the shares the
//! weights give. [`crate::spec`] (the workload flag) and [`crate::phases`] (a mix per
//! phase) both read mixes through it.

use ferry_control::Nanos;
use ferry_spec::{parse_duration, parse_f64_in, parse_params, parse_u64_max, SpecError};

use crate::model::{FunctionKind, FunctionSpec, OBJECT_BYTES_DEFAULT};

/// Compute per access of the `light` preset (Kayak §2).
pub const LIGHT_COMPUTE: Nanos = Nanos(100);
/// Compute per access of the `medium` preset.
pub const MEDIUM_COMPUTE: Nanos = Nanos::from_us(1);
/// Compute per access of the `heavy` preset.
pub const HEAVY_COMPUTE: Nanos = Nanos::from_us(10);
/// Traversal depth of every preset (the paper's default).
pub const PRESET_DEPTH: u32 = 2;

/// The workload presets, for messages.
pub(crate) const PRESETS: &str = "light, medium, heavy";

/// The forms a workload may take, for messages.
pub(crate) const WORKLOAD_FORMS: &str =
    "light, medium, heavy, traverse:..., task:..., random-tasks:..., phases:..., ycsbt:..., social[:...] or bimodal:...";

/// The function of a preset name, if it is one.
pub fn preset(name: &str) -> Option<FunctionSpec> {
    let compute = match name {
        "light" => LIGHT_COMPUTE,
        "medium" => MEDIUM_COMPUTE,
        "heavy" => HEAVY_COMPUTE,
        _ => return None,
    };
    Some(FunctionSpec::traverse(name, PRESET_DEPTH, compute))
}

/// The value of the parameter `key` that the form `what` requires.
fn required<'a>(what: &'static str, key: &'static str, value: Option<&'a str>) -> Result<&'a str, SpecError> {
    value.ok_or(SpecError::MissingParam { what, key })
}

/// A function's accesses, the parameter `key` of `what`: at least 1, at most 1024.
fn accesses(what: &'static str, key: &'static str, value: Option<&str>) -> Result<u64, SpecError> {
    match parse_u64_max(key, required(what, key, value)?, 1024, "[1, 1024]")? {
        0 => Err(SpecError::OutOfRange {
            what: key,
            value: "0".into(),
            range: "[1, 1024]",
        }),
        n => Ok(n),
    }
}

fn parse_traverse(params: &str) -> Result<FunctionSpec, SpecError> {
    const WHAT: &str = "traverse";
    let kv = parse_params(WHAT, params, "depth, compute, size, dist")?;
    let get = |k: &str| kv.iter().find(|(x, _)| *x == k).map(|(_, v)| *v);
    let depth = accesses(WHAT, "depth", get("depth"))?;
    let compute = parse_duration(required(WHAT, "compute", get("compute"))?)?;
    let object_bytes = match get("size") {
        Some(v) => parse_u64_max("size", v, 64 << 20, "[0, 67108864] bytes")?,
        None => OBJECT_BYTES_DEFAULT,
    };
    let dist = match get("dist") {
        None | Some("fixed") => crate::model::ComputeDist::Fixed,
        Some("exp") => crate::model::ComputeDist::Exp,
        Some(other) => return Err(SpecError::Invalid(format!("dist '{other}' is not one of fixed, exp"))),
    };
    Ok(FunctionSpec {
        name: "traverse".into(),
        kind: FunctionKind::Traverse,
        accesses: depth as u32,
        writes: 0,
        object_bytes,
        compute,
        dist,
        slo: None,
    })
}

/// `task:accesses=N,compute=DURATION[,size=BYTES][,dist=fixed|exp]`: Pyxis' task tuple
/// (§VI: storage accesses, object size, computation). `compute` is the task's whole
/// computation; the model spreads it over the accesses (to the nanosecond: a remainder
/// below `accesses` ns is dropped), which leaves each side's CPU per request as the tuple
/// says. Named by its tuple, so the tasks of a mix tell apart in reports.
fn parse_task(params: &str) -> Result<FunctionSpec, SpecError> {
    const WHAT: &str = "task";
    let kv = parse_params(WHAT, params, "accesses, compute, size, dist")?;
    let get = |k: &str| kv.iter().find(|(x, _)| *x == k).map(|(_, v)| *v);
    let accesses = accesses(WHAT, "accesses", get("accesses"))?;
    let traverse = [
        format!("depth={accesses}"),
        get("size").map(|v| format!("size={v}")).unwrap_or_default(),
        get("dist").map(|v| format!("dist={v}")).unwrap_or_default(),
        format!(
            "compute={}ns",
            parse_duration(required(WHAT, "compute", get("compute"))?)?.0 / accesses
        ),
    ];
    let mut f = parse_traverse(&traverse.join(","))?;
    f.name = format!("task:{}", params.trim());
    Ok(f)
}

/// One element of a `+`-mix: a function (a preset, `traverse:...` or `task:...`) and its
/// `@` weight (1 when none is given).
pub(crate) fn parse_element(input: &str) -> Result<(FunctionSpec, f64), SpecError> {
    let (base, weight) = match input.split_once('@') {
        Some((b, w)) => (
            b.trim(),
            parse_f64_in("mix weight", w, f64::MIN_POSITIVE, 1e12, "(0, 1e12]")?,
        ),
        None => (input.trim(), 1.0),
    };
    if base.is_empty() {
        return Err(SpecError::Empty { what: "workload" });
    }
    if let Some(f) = preset(base) {
        return Ok((f, weight));
    }
    match base.split_once(':') {
        Some(("traverse", params)) => Ok((parse_traverse(params)?, weight)),
        Some(("task", params)) => Ok((parse_task(params)?, weight)),
        None if base == "traverse" => Err(SpecError::MissingParam {
            what: "traverse",
            key: "depth",
        }),
        None if base == "task" => Err(SpecError::MissingParam {
            what: "task",
            key: "accesses",
        }),
        _ => Err(SpecError::UnknownWorkload {
            name: base.split(':').next().unwrap_or(base).to_string(),
            expected: WORKLOAD_FORMS,
        }),
    }
}

/// The shares of a mix's elements from their `@` weights: fractions (every element weighted
/// below 1) must sum to 1; otherwise the weights are relative (`A@1+B@3`) and normalised.
/// A mix that weights some elements with fractions and leaves others bare is ambiguous
/// and refused.
pub(crate) fn mix_shares(elements: &[&str], weights: &[f64]) -> Result<Vec<f64>, SpecError> {
    let explicit = elements.iter().filter(|e| e.contains('@')).count();
    let fractions = weights.iter().all(|&w| w < 1.0);
    if elements.len() > 1 && explicit > 0 && explicit < elements.len() && weights.iter().any(|&w| w < 1.0) {
        return Err(SpecError::Invalid(format!(
            "mix '{}' weights some elements with fractions and not others: give every element a weight \
             (fractions summing to 1, or relative weights such as A@1+B@3)",
            elements.join("+")
        )));
    }
    let total: f64 = weights.iter().sum();
    if explicit == elements.len() && fractions && (total - 1.0).abs() > 1e-6 {
        return Err(SpecError::Invalid(format!(
            "mix fractions {} sum to {total}, not 1 (or give relative weights such as A@1+B@3)",
            weights.iter().map(|w| w.to_string()).collect::<Vec<_>>().join(" + ")
        )));
    }
    Ok(weights.iter().map(|w| w / total).collect())
}
