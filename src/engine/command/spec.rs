//! A command's table in the commands file decoded into a [`CommandSpec`]: its keys, its
//! parameters' schemas and its argv template.

use std::path::Path;
use std::time::Duration;

use indexmap::IndexMap;
use serde_json::{Map, Value};

use super::CommandSpec;
use super::decoder::{Decoder, join};
use super::params::{self, Element};
use crate::engine::loader::is_id;

const COMMAND_KEYS: &[&str] = &[
    "description",
    "argv",
    "params",
    "timeout",
    "max_output",
    "max_memory",
    "max_processes",
    "max_file_size",
    "env",
    "writable",
    "network",
    "ok_exit_codes",
    "on_resume",
    "unconfined",
];

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5 * 60);
const DEFAULT_MAX_OUTPUT: u64 = 1 << 20;
/// The most a command may keep of each stream: what is kept is held in memory, then in
/// the run's record.
const MAX_MAX_OUTPUT: u64 = 64 << 20;
const DEFAULT_MAX_MEMORY: u64 = 1 << 30;
const DEFAULT_MAX_PROCESSES: u64 = 64;
const DEFAULT_MAX_FILE_SIZE: u64 = 64 << 20;

impl Decoder {
    pub(super) fn file(&mut self, root: &Map<String, Value>) -> IndexMap<String, CommandSpec> {
        let mut commands = IndexMap::new();
        for (key, value) in root {
            if key != "commands" {
                self.report(
                    key,
                    "unknown key; the file holds `[commands.NAME]` tables and nothing else",
                );
                continue;
            }
            let Value::Object(table) = value else {
                self.report(key, "expected a table of commands, `[commands.NAME]`");
                continue;
            };
            for (name, command) in table {
                let path = join("commands", name);
                if !is_id(name) {
                    self.report(
                        &path,
                        "a command's name is a lowercase letter, then up to 63 lowercase \
                         letters, digits or `_`",
                    );
                }
                if let Some(spec) = self.command(&path, name, command) {
                    commands.insert(name.clone(), spec);
                }
            }
        }
        commands
    }

    /// One command, or `None` after reporting its problems.
    fn command(&mut self, path: &str, name: &str, value: &Value) -> Option<CommandSpec> {
        let Value::Object(table) = value else {
            self.report(path, "expected a table, `[commands.NAME]`");
            return None;
        };
        let before = self.problem_count();
        for key in table.keys() {
            if !COMMAND_KEYS.contains(&key.as_str()) {
                self.report(
                    &join(path, key),
                    format!("unknown key; allowed keys: {}", COMMAND_KEYS.join(", ")),
                );
            }
        }
        let field = |key: &str| (join(path, key), table.get(key));
        let (params_path, params) = field("params");
        let (params, declared) = self.params(&params_path, params);
        let (argv_path, argv) = field("argv");
        let template = self.template(&argv_path, argv, &declared);
        if let Some(template) = &template {
            for name in &declared {
                let used = template.contains(&Element::Param(name.clone()));
                if !used {
                    let message = format!("no element of `argv` is `{{{name}}}`");
                    self.report(&join(&params_path, name), message);
                }
            }
        }
        let description = self.string(field("description"));
        let timeout = self.duration(field("timeout")).unwrap_or(DEFAULT_TIMEOUT);
        let max_output = self.size(field("max_output"), DEFAULT_MAX_OUTPUT);
        if max_output > MAX_MAX_OUTPUT {
            self.report(
                &join(path, "max_output"),
                "at most 64MiB is kept of a stream",
            );
        }
        let max_memory = self.size(field("max_memory"), DEFAULT_MAX_MEMORY);
        let max_processes = self.count(field("max_processes"), DEFAULT_MAX_PROCESSES);
        let max_file_size = self.size(field("max_file_size"), DEFAULT_MAX_FILE_SIZE);
        let env = self.env(field("env"));
        let writable = self.writable(field("writable"));
        let network = self.flag(field("network"));
        let unconfined = self.flag(field("unconfined"));
        let ok_exit_codes = self.exit_codes(field("ok_exit_codes"));
        let on_resume = self.on_resume(field("on_resume"));
        (self.problem_count() == before).then(|| CommandSpec {
            name: name.to_owned(),
            description,
            template: template.unwrap_or_default(),
            params,
            timeout,
            max_output: max_output as usize,
            max_memory,
            max_processes,
            max_file_size,
            env,
            writable,
            network,
            ok_exit_codes,
            on_resume,
            unconfined,
        })
    }

    /// The parameters whose schemas are sound, by name, and the names of all declared.
    fn params(
        &mut self,
        path: &str,
        value: Option<&Value>,
    ) -> (IndexMap<String, params::Param>, Vec<String>) {
        let mut params = IndexMap::new();
        let Some(value) = value else {
            return (params, Vec::new());
        };
        let Value::Object(table) = value else {
            self.report(
                path,
                "expected a table of parameters, `[commands.NAME.params.P]`",
            );
            return (params, Vec::new());
        };
        for (name, schema) in table {
            let path = join(path, name);
            if !is_id(name) {
                self.report(
                    &path,
                    "a parameter's name is a lowercase letter, then up to 63 lowercase \
                     letters, digits or `_`",
                );
            }
            match params::Param::from_schema(schema) {
                Ok(param) => {
                    params.insert(name.clone(), param);
                }
                Err(problems) => {
                    for problem in problems {
                        self.report(&path, problem);
                    }
                }
            }
        }
        (params, table.keys().cloned().collect())
    }

    /// The argv template: `argv[0]` an absolute path, each placeholder a whole element
    /// naming a declared parameter. `None` when `argv` is missing or not a list of strings.
    fn template(
        &mut self,
        path: &str,
        value: Option<&Value>,
        declared: &[String],
    ) -> Option<Vec<Element>> {
        let Some(items) = self.strings(path, value, "the program and its arguments") else {
            if value.is_none() {
                self.report(path, "is required: the program and its arguments");
            }
            return None;
        };
        if items.is_empty() {
            self.report(path, "names no program");
        }
        let mut template = Vec::new();
        for (index, item) in items.iter().enumerate() {
            let at = format!("{path}[{index}]");
            // A refused element is kept all the same, so that the parameter it names is not
            // also called unused; a template with problems is never run.
            match params::element(item) {
                Err(problem) => self.report(&at, problem),
                Ok(element) => {
                    match &element {
                        Element::Param(name) if index == 0 => self.report(
                            &at,
                            format!(
                                "the program is fixed, not the parameter `{name}`; \
                                 write its path"
                            ),
                        ),
                        Element::Param(name) if !declared.contains(name) => {
                            self.report(&at, format!("the placeholder names no parameter `{name}`"))
                        }
                        Element::Fixed(text) if index == 0 && !Path::new(text).is_absolute() => {
                            self.report(&at, "the program is an absolute path, like `/bin/bash`")
                        }
                        _ => {}
                    }
                    template.push(element);
                }
            }
        }
        Some(template)
    }
}
