//! Printing the configuration: the effective values for the startup log, and the table of
//! docs/CONFIG.md.

use super::fields::fields;
use super::provenance::{describe_source, LoadedConfig};
use super::sections::Config;

impl Config {
    /// The effective configuration, one `VAR=value` per line, for the startup log.
    pub fn describe(&self) -> String {
        fields()
            .iter()
            .map(|f| format!("{}={}\n", f.env, f.value(self)))
            .collect()
    }
}

impl LoadedConfig {
    /// The effective configuration with the source of each value (`# default`, `# env`,
    /// `# FILE:LINE key`, `# flag -n`), then the warnings as comments: `ringmq config` and the
    /// startup log.
    pub fn describe(&self) -> String {
        let mut out: String = fields()
            .iter()
            .zip(self.sources())
            .map(|(f, source)| {
                format!(
                    "{}={}  # {}\n",
                    f.env,
                    f.value(&self.config),
                    describe_source(source)
                )
            })
            .collect();
        for warning in &self.warnings {
            out.push_str(&format!("# warning: {warning}\n"));
        }
        out
    }
}

/// The env var table of docs/CONFIG.md, generated from [`fields`] (`ringmq config --markdown`).
pub fn markdown_table() -> String {
    let defaults = Config::default();
    let mut out = String::from(
        "| variable | default | RocketMQ name | meaning |\n| --- | --- | --- | --- |\n",
    );
    for f in fields() {
        let default = if f.env == "RINGMQ_STORE_ROOT_DIR" {
            "`$HOME/store`".to_string()
        } else {
            format!("`{}`", f.value(&defaults))
        };
        let java = if f.rocketmq_name.is_empty() {
            "-"
        } else {
            f.rocketmq_name
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            f.env, default, java, f.doc
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_config_md_lists_every_variable_with_its_default() {
        let doc = include_str!("../../docs/CONFIG.md");
        let defaults = Config::default();
        for f in fields() {
            let row_start = format!("| `{}` |", f.env);
            let row = doc
                .lines()
                .find(|l| l.starts_with(&row_start))
                .unwrap_or_else(|| panic!("docs/CONFIG.md lacks a row for {}", f.env));
            if f.env != "RINGMQ_STORE_ROOT_DIR" {
                let want = format!("`{}`", f.value(&defaults));
                assert!(
                    row.contains(&want),
                    "{} row should show default {want}",
                    f.env
                );
            }
        }
    }
}
