//! Every link in the docs resolves. Files move (the layout changed once already), and a doc that
//! points at a file that is gone misleads the next reader. Checked:
//! - Markdown links `[text](target)` in README.md, docs/*.md and the other tracked `.md` files:
//!   the target file exists, and a `#anchor` names a heading of that file;
//! - repository paths written in backticks in those files (`src/…`, `bench/…`, `tests/…`,
//!   `scripts/…`, `docs/…`): the file or folder exists;
//! - `docs/….md` named in any source file, script or manifest: the file exists.

use std::path::{Path, PathBuf};

/// Folders whose paths, written in backticks in a doc, must exist.
const CHECKED_PATH_PREFIXES: &[&str] = &["src/", "bench/", "tests/", "scripts/", "docs/", ".ci/"];
/// Folders never read (build output, other checkouts).
const SKIPPED_DIRS: &[&str] = &["target", ".git", "node_modules"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn files_with(dir: &Path, accept: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !SKIPPED_DIRS.contains(&name.as_str()) {
                files_with(&path, accept, out);
            }
        } else if accept(&path) {
            out.push(path);
        }
    }
}

fn markdown_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    files_with(
        &root(),
        &|p| p.extension().is_some_and(|e| e == "md"),
        &mut out,
    );
    out.sort();
    out
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(markdown: &str) -> Vec<String> {
    markdown
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| anchor_of(l.trim_start_matches('#')))
        .collect()
}

/// `(target)` of every `[text](target)` on a line.
fn link_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        match after.find(')') {
            Some(end) => {
                out.push(after[..end].trim().to_string());
                rest = &after[end..];
            }
            None => break,
        }
    }
    out
}

/// Words in backticks that look like repository paths.
fn backticked_paths(line: &str) -> Vec<String> {
    line.split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| CHECKED_PATH_PREFIXES.iter().any(|p| w.starts_with(p)))
        // Globs, placeholders and command lines are not paths.
        .filter(|w| !w.contains(['*', '<', '{', ' ', '$', '…']))
        .map(|w| w.trim_end_matches([',', '.', ':']).to_string())
        .collect()
}

fn check_link(md: &Path, target: &str, problems: &mut Vec<String>) {
    if target.starts_with("http://") || target.starts_with("https://") || target.is_empty() {
        return;
    }
    let (file, anchor) = match target.split_once('#') {
        Some((f, a)) => (f, Some(a)),
        None => (target, None),
    };
    let resolved = if file.is_empty() {
        md.to_path_buf()
    } else {
        md.parent().unwrap().join(file)
    };
    if !resolved.exists() {
        problems.push(format!("{}: link to missing {target}", rel(md)));
        return;
    }
    if let Some(anchor) = anchor {
        let text = std::fs::read_to_string(&resolved).unwrap_or_default();
        if !anchors(&text).iter().any(|a| a == anchor) {
            problems.push(format!("{}: no heading for #{anchor} in {file}", rel(md)));
        }
    }
}

fn rel(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn every_markdown_link_and_path_resolves() {
    let mut problems = Vec::new();
    for md in markdown_files() {
        let text = std::fs::read_to_string(&md).unwrap();
        let mut in_code_block = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                in_code_block = !in_code_block;
                continue;
            }
            if in_code_block {
                continue;
            }
            for target in link_targets(line) {
                check_link(&md, &target, &mut problems);
            }
            for path in backticked_paths(line) {
                // A README inside a package names paths of that package.
                let local = md.parent().unwrap().join(&path);
                if !root().join(&path).exists() && !local.exists() {
                    problems.push(format!("{}: names missing path `{path}`", rel(&md)));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "dead doc links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_docs_file_named_in_code_exists() {
    let mut sources = Vec::new();
    let code = |p: &Path| {
        let name = p.file_name().unwrap().to_string_lossy();
        p.extension()
            .is_some_and(|e| e == "rs" || e == "sh" || e == "toml")
            || name == "run"
    };
    files_with(&root(), &code, &mut sources);
    let mut problems = Vec::new();
    for file in sources {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            let mut rest = line;
            while let Some(i) = rest.find("docs/") {
                let word: String = rest[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || "/._-".contains(*c))
                    .collect();
                let word = word.trim_end_matches('.');
                if word.ends_with(".md") && !root().join(word).exists() {
                    problems.push(format!("{}:{}: names missing {word}", rel(&file), n + 1));
                }
                rest = &rest[i + "docs/".len()..];
            }
        }
    }
    assert!(
        problems.is_empty(),
        "dead doc references in code:\n{}",
        problems.join("\n")
    );
}

#[test]
fn anchors_follow_github_rules() {
    assert_eq!(
        anchor_of(" Spreading connections: SO_REUSEPORT"),
        "spreading-connections-so_reuseport"
    );
    assert_eq!(
        anchor_of("Store file reads (`src/store/io`)"),
        "store-file-reads-srcstoreio"
    );
    assert_eq!(
        link_targets("see [a](A.md#x) and [b](B.md)"),
        ["A.md#x", "B.md"]
    );
    assert_eq!(
        backticked_paths("in `src/net/mod.rs`, not `src/*.rs`"),
        ["src/net/mod.rs"]
    );
}
