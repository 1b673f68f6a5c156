//! Results: the end-of-run summary, the JSON report (parameters, machine, git revision,
//! results, timeline), the hand-written SVG chart (latency percentile curves and throughput
//! over time) and the Markdown summary table of several reports.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::{json, Value};

use crate::error::BenchError;
use crate::stats::{format_us, Meter, TimelinePoint, BYTES_PER_MB, REPORT_QUANTILES};

/// Final figures of one meter.
#[derive(Debug, Clone)]
pub struct MeterResult {
    pub name: String,
    pub messages: u64,
    pub bytes: u64,
    pub failures: u64,
    pub elapsed_s: f64,
    pub histogram: Histogram<u64>,
    pub failure_samples: Vec<String>,
}

impl MeterResult {
    pub fn from_meter(meter: &Meter, elapsed: Duration) -> Self {
        let counts = meter.counts();
        MeterResult {
            name: meter.name.to_owned(),
            messages: counts.messages,
            bytes: counts.bytes,
            failures: counts.failures,
            elapsed_s: elapsed.as_secs_f64(),
            histogram: meter.merged(),
            failure_samples: meter.failure_samples(),
        }
    }

    pub fn messages_per_s(&self) -> f64 {
        self.messages as f64 / self.elapsed_s.max(1e-9)
    }

    pub fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / self.elapsed_s.max(1e-9) / BYTES_PER_MB
    }

    /// Latency percentiles in µs (0 when nothing was recorded).
    pub fn latency_json(&self) -> Value {
        let h = &self.histogram;
        let mut map = serde_json::Map::new();
        map.insert("count".into(), json!(h.len()));
        for (name, q) in REPORT_QUANTILES {
            map.insert(name.into(), json!(h.value_at_quantile(q)));
        }
        map.insert("max".into(), json!(h.max()));
        map.insert("min".into(), json!(if h.is_empty() { 0 } else { h.min() }));
        map.insert("mean".into(), json!(round3(h.mean())));
        Value::Object(map)
    }

    pub fn to_json(&self) -> Value {
        json!({
            "messages": self.messages,
            "bytes": self.bytes,
            "failures": self.failures,
            "elapsed_s": round3(self.elapsed_s),
            "messages_per_s": round3(self.messages_per_s()),
            "mb_per_s": round3(self.mb_per_s()),
            "latency_us": self.latency_json(),
            "percentile_curve_us": percentile_curve(&self.histogram)
                .into_iter()
                .map(|(q, v)| json!([q, v]))
                .collect::<Vec<_>>(),
            "failure_samples": self.failure_samples,
        })
    }

    /// The human summary block.
    pub fn summary(&self) -> String {
        let h = &self.histogram;
        let mut out = format!(
            "{}: {} msgs in {:.2} s = {:.0} msg/s, {:.2} MB/s, {} failures",
            self.name,
            self.messages,
            self.elapsed_s,
            self.messages_per_s(),
            self.mb_per_s(),
            self.failures
        );
        if !h.is_empty() {
            let _ = write!(out, "\n  latency ({} samples):", h.len());
            for (name, q) in REPORT_QUANTILES {
                let _ = write!(
                    out,
                    " {}={}",
                    name.replace('_', "."),
                    format_us(h.value_at_quantile(q))
                );
            }
            let _ = write!(out, " max={}", format_us(h.max()));
        }
        for sample in &self.failure_samples {
            let _ = write!(out, "\n  failure: {sample}");
        }
        out
    }
}

fn round3(v: f64) -> f64 {
    if v.is_finite() {
        (v * 1000.0).round() / 1000.0
    } else {
        0.0
    }
}

/// Points of the percentile curve: quantiles 1 − 10^(−k/10) for k = 0..=50 (0 % .. 99.999 %)
/// and the max, as (percentile, µs).
pub fn percentile_curve(h: &Histogram<u64>) -> Vec<(f64, u64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut points: Vec<(f64, u64)> = (0..=50)
        .map(|k| {
            let q = 1.0 - 10f64.powf(-f64::from(k) / 10.0);
            (round3(q * 100.0 * 1000.0) / 1000.0, h.value_at_quantile(q))
        })
        .collect();
    points.push((100.0, h.max()));
    points
}

/// Machine facts for the report.
pub fn machine_json() -> Value {
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into());
    let memory_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        });
    json!({
        "cpu_model": cpu_model,
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "kernel": kernel,
        "memory_kib": memory_kib,
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
    })
}

/// `git rev-parse HEAD` (with `-dirty` when the tree has changes), or `RINGMQ_GIT_REV`, or
/// "unknown".
pub fn git_revision() -> String {
    if let Ok(rev) = std::env::var("RINGMQ_GIT_REV") {
        if !rev.is_empty() {
            return rev;
        }
    }
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    match run(&["rev-parse", "HEAD"]) {
        Some(rev) if !rev.is_empty() => {
            let dirty = run(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{rev}-dirty")
            } else {
                rev
            }
        }
        _ => "unknown".into(),
    }
}

/// Timeline as JSON rows.
pub fn timeline_json(timeline: &[TimelinePoint]) -> Value {
    Value::Array(
        timeline
            .iter()
            .map(|p| {
                let meters: serde_json::Map<String, Value> = p
                    .meters
                    .iter()
                    .map(|m| {
                        (
                            m.name.to_owned(),
                            json!({
                                "messages_per_s": round3(m.messages_per_s),
                                "mb_per_s": round3(m.mb_per_s),
                                "failures": m.failures,
                                "p99_us": m.p99_us,
                            }),
                        )
                    })
                    .collect();
                json!({"t_s": round3(p.t_s), "meters": meters})
            })
            .collect(),
    )
}

/// The whole report.
pub fn report_json(
    parameters: Value,
    results: &[MeterResult],
    timeline: &[TimelinePoint],
    extra: Value,
    error: Option<&str>,
) -> Value {
    let results_map: serde_json::Map<String, Value> = results
        .iter()
        .map(|r| (r.name.clone(), r.to_json()))
        .collect();
    json!({
        "tool": "ringmq-bench",
        "version": env!("CARGO_PKG_VERSION"),
        "parameters": parameters,
        "machine": machine_json(),
        "git_revision": git_revision(),
        "started_at_unix_ms": crate::stats::epoch_us() / 1000,
        "results": results_map,
        "timeline": timeline_json(timeline),
        "extra": extra,
        "error": error,
    })
}

pub fn write_file(path: &Path, contents: &str) -> Result<(), BenchError> {
    std::fs::write(path, contents).map_err(|source| BenchError::Report {
        path: path.display().to_string(),
        source,
    })
}

fn escape_xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const SVG_WIDTH: f64 = 960.0;
const SVG_HEIGHT: f64 = 420.0;
const PANEL_WIDTH: f64 = 400.0;
const PANEL_HEIGHT: f64 = 300.0;
const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

/// The chart: left, latency percentile curves (x = percentile on a 1/(1−p) log scale up to
/// 99.999 %, y = µs on a log scale); right, messages/s per second of the run.
pub fn render_svg(title: &str, results: &[MeterResult], timeline: &[TimelinePoint]) -> String {
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{SVG_WIDTH}" height="{SVG_HEIGHT}" viewBox="0 0 {SVG_WIDTH} {SVG_HEIGHT}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(
        svg,
        r#"<rect x="0" y="0" width="{SVG_WIDTH}" height="{SVG_HEIGHT}" fill="white"/>"#
    );
    let _ = write!(
        svg,
        r#"<text x="{}" y="20" text-anchor="middle" font-size="14">{}</text>"#,
        SVG_WIDTH / 2.0,
        escape_xml(title)
    );
    latency_panel(&mut svg, 60.0, 50.0, results);
    throughput_panel(&mut svg, 540.0, 50.0, timeline);
    svg.push_str("</svg>\n");
    svg
}

fn axes(svg: &mut String, x0: f64, y0: f64, title: &str, x_label: &str, y_label: &str) {
    let _ = write!(
        svg,
        r##"<g><text x="{}" y="{}" text-anchor="middle" font-size="12">{}</text><rect x="{x0}" y="{y0}" width="{PANEL_WIDTH}" height="{PANEL_HEIGHT}" fill="none" stroke="#333"/><text x="{}" y="{}" text-anchor="middle">{}</text><text x="{}" y="{}" text-anchor="middle" transform="rotate(-90 {} {})">{}</text></g>"##,
        x0 + PANEL_WIDTH / 2.0,
        y0 - 8.0,
        escape_xml(title),
        x0 + PANEL_WIDTH / 2.0,
        y0 + PANEL_HEIGHT + 32.0,
        escape_xml(x_label),
        x0 - 45.0,
        y0 + PANEL_HEIGHT / 2.0,
        x0 - 45.0,
        y0 + PANEL_HEIGHT / 2.0,
        escape_xml(y_label)
    );
}

fn latency_panel(svg: &mut String, x0: f64, y0: f64, results: &[MeterResult]) {
    axes(
        svg,
        x0,
        y0,
        "latency by percentile",
        "percentile",
        "latency (µs, log)",
    );
    // x: log10(1 / (1 - p)) from 0 (p = 0) to 5 (p = 99.999 %).
    let x_of = |pct: f64| {
        let rest = (1.0 - pct / 100.0).max(1e-5);
        x0 + (-rest.log10()).clamp(0.0, 5.0) / 5.0 * PANEL_WIDTH
    };
    let max_us = results
        .iter()
        .map(|r| r.histogram.max())
        .max()
        .unwrap_or(1)
        .max(10);
    let decades = (max_us as f64).log10().ceil().max(1.0);
    let y_of = |us: f64| {
        y0 + PANEL_HEIGHT - (us.max(1.0).log10() / decades).clamp(0.0, 1.0) * PANEL_HEIGHT
    };
    for (label, pct) in [
        ("0%", 0.0),
        ("90%", 90.0),
        ("99%", 99.0),
        ("99.9%", 99.9),
        ("99.99%", 99.99),
        ("99.999%", 99.999),
    ] {
        let x = x_of(pct);
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{}" stroke="#ddd"/><text x="{x:.1}" y="{}" text-anchor="middle">{label}</text>"##,
            y0 + PANEL_HEIGHT,
            y0 + PANEL_HEIGHT + 14.0
        );
    }
    for d in 0..=(decades as u32) {
        let y = y_of(10f64.powi(d as i32));
        let _ = write!(
            svg,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            x0 + PANEL_WIDTH,
            x0 - 4.0,
            y + 4.0,
            format_us(10u64.pow(d)).replace(".00", "")
        );
    }
    for (i, result) in results
        .iter()
        .filter(|r| !r.histogram.is_empty())
        .enumerate()
    {
        let points: Vec<String> = percentile_curve(&result.histogram)
            .into_iter()
            .map(|(pct, us)| format!("{:.1},{:.1}", x_of(pct), y_of(us as f64)))
            .collect();
        let label = format!(
            "{} p50 {} p99 {} max {}",
            result.name,
            format_us(result.histogram.value_at_quantile(0.5)),
            format_us(result.histogram.value_at_quantile(0.99)),
            format_us(result.histogram.max())
        );
        series(svg, (x0, y0), i, &points, &label);
    }
}

/// Series `i` of a panel whose top-left corner is `origin`: its line through `points` and its
/// label in the series' colour.
fn series(svg: &mut String, origin: (f64, f64), i: usize, points: &[String], label: &str) {
    let color = COLORS[i % COLORS.len()];
    let _ = write!(
        svg,
        r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{}"/><text x="{}" y="{}" fill="{color}">{}</text>"#,
        points.join(" "),
        origin.0 + 8.0,
        origin.1 + 16.0 + 14.0 * i as f64,
        escape_xml(label)
    );
}

fn throughput_panel(svg: &mut String, x0: f64, y0: f64, timeline: &[TimelinePoint]) {
    axes(
        svg,
        x0,
        y0,
        "throughput over time",
        "seconds",
        "messages / s",
    );
    let t_max = timeline.iter().map(|p| p.t_s).fold(1.0, f64::max);
    let names: Vec<&str> = timeline
        .first()
        .map(|p| p.meters.iter().map(|m| m.name).collect())
        .unwrap_or_default();
    let rate_max = timeline
        .iter()
        .flat_map(|p| p.meters.iter().map(|m| m.messages_per_s))
        .fold(1.0, f64::max)
        * 1.1;
    let x_of = |t: f64| x0 + (t / t_max).clamp(0.0, 1.0) * PANEL_WIDTH;
    let y_of = |r: f64| y0 + PANEL_HEIGHT - (r / rate_max).clamp(0.0, 1.0) * PANEL_HEIGHT;
    for i in 0..=4 {
        let r = rate_max * f64::from(i) / 4.0;
        let t = t_max * f64::from(i) / 4.0;
        let t_label = if t_max < 10.0 {
            format!("{t:.1}")
        } else {
            format!("{t:.0}")
        };
        let _ = write!(
            svg,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{r:.0}</text><text x="{:.1}" y="{}" text-anchor="middle">{t_label}</text>"##,
            x0 + PANEL_WIDTH,
            x0 - 4.0,
            y_of(r) + 4.0,
            x_of(t),
            y0 + PANEL_HEIGHT + 14.0,
            y = y_of(r)
        );
    }
    for (i, name) in names.iter().enumerate() {
        let points: Vec<String> = timeline
            .iter()
            .filter_map(|p| {
                p.meters
                    .iter()
                    .find(|m| m.name == *name)
                    .map(|m| (p.t_s, m.messages_per_s))
            })
            .map(|(t, r)| format!("{:.1},{:.1}", x_of(t), y_of(r)))
            .collect();
        series(svg, (x0, y0), i, &points, name);
    }
}

/// One row per report and meter: a Markdown table, or tab-separated values for scripts
/// (`label kind meter msg/s MB/s failures p50_us p99_us p99_9_us max_us not_consumed`,
/// latencies in µs, `-` when nothing was measured; `not_consumed` = messages an e2e run sent
/// but did not consume, on the `e2e` row only).
pub fn summary_table(paths: &[std::path::PathBuf], tsv: bool) -> Result<String, BenchError> {
    let mut out = if tsv {
        String::new()
    } else {
        String::from(
            "| report | kind | meter | msg/s | MB/s | failures | p50 | p99 | p99.9 | max |\n\
             |---|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
        )
    };
    for path in paths {
        let text = std::fs::read_to_string(path).map_err(|source| BenchError::Report {
            path: path.display().to_string(),
            source,
        })?;
        let value: Value = serde_json::from_str(&text).map_err(|e| BenchError::BadReport {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let name = value["parameters"]["label"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| {
                path.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            });
        let kind = value["parameters"]["kind"].as_str().unwrap_or("?");
        let Some(results) = value["results"].as_object() else {
            return Err(BenchError::BadReport {
                path: path.display().to_string(),
                reason: "no results".into(),
            });
        };
        for (meter, r) in results {
            let measured = r["latency_us"]["count"].as_u64().unwrap_or(0) > 0;
            let lat = |k: &str| {
                let value = r["latency_us"][k].as_u64().filter(|_| measured);
                match (value, tsv) {
                    (Some(us), true) => us.to_string(),
                    (Some(us), false) => format_us(us),
                    (None, _) => "-".into(),
                }
            };
            let (rate, mb, failures) = (
                r["messages_per_s"].as_f64().unwrap_or(0.0),
                r["mb_per_s"].as_f64().unwrap_or(0.0),
                r["failures"].as_u64().unwrap_or(0),
            );
            let cells = [
                name.clone(),
                kind.to_owned(),
                meter.clone(),
                format!("{rate:.0}"),
                format!("{mb:.2}"),
                failures.to_string(),
                lat("p50"),
                lat("p99"),
                lat("p99_9"),
                lat("max"),
            ];
            if tsv {
                let not_consumed = value["extra"]["not_consumed"]
                    .as_u64()
                    .filter(|_| meter == "e2e")
                    .map_or_else(|| "-".to_owned(), |n| n.to_string());
                let _ = writeln!(out, "{}\t{not_consumed}", cells.join("\t"));
            } else {
                let _ = writeln!(out, "| {} |", cells.join(" | "));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::stats::{new_histogram, MeterPoint};

    /// A minimal XML well-formedness check: every tag closes in order, attributes are quoted,
    /// no raw `<` or `&` in text.
    pub fn assert_well_formed_xml(text: &str) {
        let mut stack: Vec<String> = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find('<') {
            let between = &rest[..start];
            assert!(!between.contains('>'), "stray > in text {between:?}");
            for (i, _) in between.match_indices('&') {
                let entity = &between[i..];
                assert!(
                    ["&amp;", "&lt;", "&gt;", "&quot;"]
                        .iter()
                        .any(|e| entity.starts_with(e)),
                    "raw & in {between:?}"
                );
            }
            let end = rest[start..].find('>').expect("tag closes") + start;
            let tag = &rest[start + 1..end];
            assert!(!tag.contains('<'), "nested < in tag {tag:?}");
            assert_eq!(
                tag.matches('"').count() % 2,
                0,
                "unbalanced quotes in {tag:?}"
            );
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(
                    stack.pop().as_deref(),
                    Some(name.trim()),
                    "mismatched </{name}>"
                );
            } else if !tag.ends_with('/') && !tag.starts_with('?') && !tag.starts_with('!') {
                let name = tag.split_whitespace().next().expect("tag name");
                stack.push(name.to_owned());
            }
            rest = &rest[end + 1..];
        }
        assert!(stack.is_empty(), "unclosed tags {stack:?}");
        assert!(text.trim_start().starts_with("<svg"));
    }

    pub fn sample_result(name: &str) -> MeterResult {
        let mut histogram = new_histogram();
        for v in 1..=10_000u64 {
            histogram.record(v * 10).expect("in range");
        }
        MeterResult {
            name: name.into(),
            messages: 10_000,
            bytes: 1_280_000,
            failures: 1,
            elapsed_s: 2.0,
            histogram,
            failure_samples: vec!["send answered 2 (busy <&>)".into()],
        }
    }

    fn sample_timeline() -> Vec<TimelinePoint> {
        (1..=3)
            .map(|t| TimelinePoint {
                t_s: f64::from(t),
                meters: vec![MeterPoint {
                    name: "send",
                    messages_per_s: 5000.0 * f64::from(t),
                    mb_per_s: 0.64,
                    failures: 0,
                    p99_us: 990,
                }],
            })
            .collect()
    }

    #[test]
    fn report_has_expected_keys_and_round_trips() {
        let results = [sample_result("send"), sample_result("e2e")];
        let report = report_json(
            json!({"kind": "producer"}),
            &results,
            &sample_timeline(),
            json!({}),
            None,
        );
        let text = serde_json::to_string_pretty(&report).expect("serializes");
        let parsed: Value = serde_json::from_str(&text).expect("valid JSON");
        for key in [
            "parameters",
            "machine",
            "git_revision",
            "results",
            "timeline",
        ] {
            assert!(parsed.get(key).is_some(), "missing {key}");
        }
        for key in ["cpu_model", "cores", "kernel"] {
            assert!(
                parsed["machine"].get(key).is_some(),
                "missing machine.{key}"
            );
        }
        let send = &parsed["results"]["send"];
        assert_eq!(send["messages"], 10_000);
        assert_eq!(send["messages_per_s"], 5000.0);
        for key in ["p50", "p90", "p99", "p99_9", "p99_99", "max"] {
            assert!(
                send["latency_us"][key].as_u64().is_some(),
                "missing latency {key}"
            );
        }
        let p99 = send["latency_us"]["p99"].as_u64().expect("p99");
        assert!((98_900..=99_100).contains(&p99), "p99 {p99}");
        assert_eq!(
            parsed["timeline"][2]["meters"]["send"]["messages_per_s"],
            15000.0
        );
        let curve = send["percentile_curve_us"].as_array().expect("curve");
        assert_eq!(curve.last().expect("max")[0], 100.0);
    }

    #[test]
    fn svg_is_well_formed_and_has_both_panels() {
        let svg = render_svg(
            "W1 <send> & co",
            &[sample_result("send"), sample_result("e2e")],
            &sample_timeline(),
        );
        assert_well_formed_xml(&svg);
        assert_eq!(svg.matches("<polyline").count(), 3);
        assert!(svg.contains("latency by percentile"));
        assert!(svg.contains("throughput over time"));
        assert!(svg.contains("&lt;send&gt; &amp; co"));
        // Empty inputs still give a valid document.
        assert_well_formed_xml(&render_svg("empty", &[], &[]));
    }

    #[test]
    fn summary_table_reads_reports() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("w1.json");
        let report = report_json(
            json!({"kind": "producer", "label": "W1"}),
            &[sample_result("send")],
            &[],
            json!({}),
            None,
        );
        write_file(&path, &report.to_string()).expect("writes");
        let table = summary_table(std::slice::from_ref(&path), false).expect("table");
        assert!(
            table.contains("| W1 | producer | send | 5000 | 0.64 | 1 |"),
            "{table}"
        );
        let tsv = summary_table(&[path], true).expect("tsv");
        let cells: Vec<&str> = tsv.trim_end().split('\t').collect();
        assert_eq!(cells[..6], ["W1", "producer", "send", "5000", "0.64", "1"]);
        assert_eq!(cells[7], "99007", "p99 in µs");
        assert!(summary_table(&[dir.path().join("missing.json")], false).is_err());
    }

    #[test]
    fn xml_checker_rejects_broken_documents() {
        for bad in [
            "<svg><g></svg>",
            "<svg a=\"1></svg>",
            "<svg>a & b</svg>",
            "<svg>",
        ] {
            assert!(
                std::panic::catch_unwind(|| assert_well_formed_xml(bad)).is_err(),
                "{bad}"
            );
        }
    }
}
