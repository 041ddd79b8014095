//! The broker crate's layering: a top-level module of `src/` may import
//! only modules below it in `LAYERS` (top first), so requests flow down and
//! no import cycle can form. Test code is exempt (it may build any layer).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Top-level modules of `src/`, from the top layer down. Modules on one
/// line are one layer: they may not import each other either.
const LAYERS: &[&[&str]] = &[
    &["server"],
    &["handlers"],
    &["coordinator"],
    &["admin"],
    &["router"],
    &["quota"],
    &["replica"],
    &["cluster"],
    &["controller"],
    &["zk"],
    &["metadata"],
    &["security"],
    &["protocol"],
    &["config"],
    &["util"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The file's text without its test code: files that are test modules are
/// empty, and a `#[cfg(test)]` item ends the non-test part of a file (the
/// crate keeps its test modules at the end of a file).
fn non_test_code(path: &Path) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name == "tests.rs" || name.ends_with("_tests.rs") {
        return String::new();
    }
    let text = std::fs::read_to_string(path).expect("read source");
    match text.find("#[cfg(test)]") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// Every `crate::<module>` a text names, including `crate::{a, b::c}` lists.
fn crate_modules(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(list) = rest.strip_prefix('{') {
            let end = list.find('}').unwrap_or(list.len());
            for item in list[..end].split(',') {
                let head: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !head.is_empty() {
                    found.insert(head);
                }
            }
            continue;
        }
        let head: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !head.is_empty() {
            found.insert(head);
        }
    }
    found
}

#[test]
fn top_level_modules_import_only_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut violations = Vec::new();
    let mut unlisted = BTreeSet::new();
    for path in &files {
        let relative = path.strip_prefix(&src).expect("under src");
        let first = relative.components().next().expect("a component");
        let module = first.as_os_str().to_str().expect("utf-8 name");
        let module = module.strip_suffix(".rs").unwrap_or(module);
        if module == "lib" || module == "main" {
            continue;
        }
        let Some(layer) = layer_of(module) else {
            unlisted.insert(module.to_string());
            continue;
        };
        for target in crate_modules(&non_test_code(path)) {
            if target == module {
                continue;
            }
            match layer_of(&target) {
                Some(t) if t > layer => {}
                _ => violations.push(format!(
                    "{} ({module}) imports crate::{target}",
                    relative.display()
                )),
            }
        }
    }
    assert!(
        unlisted.is_empty(),
        "top-level modules missing from LAYERS: {unlisted:?}"
    );
    assert!(
        violations.is_empty(),
        "imports that point up or sideways:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_parser_sees_every_import_form() {
    let text = "use crate::a::B;\nuse crate::{b, c::D};\nlet x = crate::d::f();";
    let found: Vec<String> = crate_modules(text).into_iter().collect();
    assert_eq!(found, ["a", "b", "c", "d"]);
}
