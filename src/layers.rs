//! The layers of the crate, from the inside out, and a test that no module reaches into a
//! layer above its own (nor into another module of its own layer): every `crate::…` path
//! in every source file is read and checked against the table below.
//!
//! Invariant: the leaves (`auth`, `clock`, `schema`, `slots`, `telemetry`) know no other
//! module; the store knows only the leaves; the faces (`server`, `web`, `cli`) know the
//! application and what lies under it, never each other; only the transports know the
//! faces. `main.rs` and `lib.rs` wire everything; `fuzzing` is test support.

/// Each top-level module and its layer: a module may import from a lower layer only.
#[cfg(test)]
const LAYERS: &[(&str, u8)] = &[
    ("auth", 0),
    ("clock", 0),
    ("schema", 0),
    ("slots", 0),
    ("telemetry", 0),
    ("store", 1),
    ("todos", 2),
    ("engine", 3),
    ("runs", 4),
    ("app", 5),
    ("server", 6),
    ("web", 6),
    ("cli", 6),
    ("transport", 7),
];

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::LAYERS;

    /// The modules exempt from the table: the wiring at the root, and test support.
    const EXEMPT: &[&str] = &["main", "lib", "layers", "fuzzing"];

    fn layer(module: &str) -> Option<u8> {
        LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
    }

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// The top-level modules `crate::…` paths in `text` name, each with its line.
    fn named(text: &str) -> Vec<(usize, String)> {
        let mut found = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            let mut rest = code;
            while let Some(at) = rest.find("crate::") {
                let after = &rest[at + "crate::".len()..];
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                found.push((number + 1, name));
                rest = after;
            }
        }
        found
    }

    #[test]
    fn no_module_imports_from_a_layer_above_its_own_or_from_a_neighbour() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&root, &mut files);
        let mut climbs = Vec::new();
        for file in files {
            let relative = file.strip_prefix(&root).unwrap();
            let top = relative.components().next().unwrap().as_os_str();
            let top = top.to_str().unwrap().trim_end_matches(".rs").to_owned();
            if EXEMPT.contains(&top.as_str()) {
                continue;
            }
            let own = layer(&top).unwrap_or_else(|| panic!("module `{top}` has no layer"));
            let text = std::fs::read_to_string(&file).unwrap();
            for (line, name) in named(&text) {
                if name == top {
                    continue;
                }
                match layer(&name) {
                    Some(theirs) if theirs < own => {}
                    _ => climbs.push(format!(
                        "{}:{line}: `{top}` imports `crate::{name}`",
                        relative.display()
                    )),
                }
            }
        }
        assert!(
            climbs.is_empty(),
            "imports that climb:\n{}",
            climbs.join("\n")
        );
    }

    #[test]
    fn a_planted_climb_is_found() {
        let planted = "use crate::app::App;\n// crate::web in a comment is no import\n";
        assert_eq!(named(planted), [(1, "app".to_owned())]);
        assert!(layer("app") > layer("engine"));
    }
}
