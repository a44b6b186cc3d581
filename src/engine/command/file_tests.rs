//! Tests of the commands file: what loads, every problem by line at once, and the file's
//! permissions.

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::time::Duration;

use super::{Commands, Element, LoadError, OnResume};

fn problems(text: &str) -> Vec<String> {
    match Commands::parse(text) {
        Ok(commands) => panic!("loaded: {:?}", commands.names().collect::<Vec<_>>()),
        Err(problems) => problems,
    }
}

const FULL: &str = r#"
[commands.validate_bootstrap]
description = "Checks a bootstrap target"
argv = ["/bin/bash", "scripts/bootstrap/validate_bootstrap.sh", "{target}"]
timeout = "5m"
max_output = "1MiB"
max_memory = "512MiB"
max_processes = 32
max_file_size = 4096
env = ["PATH", "HOME", "LANG"]
writable = ["scripts/bootstrap", "./out/", "out"]
network = false
ok_exit_codes = [0, 1]
on_resume = "rerun"
unconfined = false

[commands.validate_bootstrap.params.target]
type = "string"
maxLength = 64

[commands.list]
argv = ["/bin/ls", "-l"]
"#;

#[test]
fn a_command_with_every_key_loads_as_written() {
    let commands = Commands::parse(FULL).unwrap();
    assert_eq!(
        commands.names().collect::<Vec<_>>(),
        ["validate_bootstrap", "list"]
    );
    let spec = commands.get("validate_bootstrap").unwrap();
    assert_eq!(spec.name(), "validate_bootstrap");
    assert_eq!(spec.description(), Some("Checks a bootstrap target"));
    assert_eq!(
        spec.template,
        [
            Element::Fixed("/bin/bash".into()),
            Element::Fixed("scripts/bootstrap/validate_bootstrap.sh".into()),
            Element::Param("target".into()),
        ]
    );
    assert_eq!(spec.timeout(), Duration::from_secs(300));
    assert_eq!(spec.max_output, 1 << 20);
    assert_eq!(spec.max_memory, 512 << 20);
    assert_eq!(spec.max_processes, 32);
    assert_eq!(spec.max_file_size, 4096);
    assert_eq!(spec.env, ["PATH", "HOME", "LANG"]);
    // `./out/` and `out` are one folder.
    assert_eq!(
        spec.writable,
        [PathBuf::from("scripts/bootstrap"), PathBuf::from("out")]
    );
    assert!(!spec.network && !spec.unconfined);
    assert!(spec.ok_exit(0) && spec.ok_exit(1) && !spec.ok_exit(2));
    assert_eq!(spec.on_resume(), OnResume::Rerun);
    assert_eq!(spec.param_names().collect::<Vec<_>>(), ["target"]);
}

#[test]
fn a_command_of_argv_alone_takes_the_defaults() {
    let commands = Commands::parse(FULL).unwrap();
    let spec = commands.get("list").unwrap();
    assert_eq!(spec.timeout(), Duration::from_secs(300));
    assert_eq!(spec.max_output, 1 << 20);
    assert_eq!(spec.max_memory, 1 << 30);
    assert_eq!(spec.max_processes, 64);
    assert_eq!(spec.max_file_size, 64 << 20);
    assert!(spec.env.is_empty() && spec.writable.is_empty());
    assert!(!spec.network && !spec.unconfined);
    assert_eq!(spec.ok_exit_codes, [0]);
    assert_eq!(spec.on_resume(), OnResume::Ask);
}

#[test]
fn an_unknown_command_name_finds_nothing() {
    let commands = Commands::parse(FULL).unwrap();
    for name in ["nope", "LIST", "list ", "", "validate_bootstrap.target"] {
        assert!(commands.get(name).is_none(), "{name}");
    }
    assert!(Commands::parse("").unwrap().is_empty());
}

#[test]
fn every_problem_of_a_file_is_reported_at_once_each_with_its_line() {
    let text = r#"version = 2
[commands.a]
argv = ["bin/tool", "{nothing}", "--out={dir}", "{dir}"]
colour = "red"
timeout = "soon"
max_output = "lots"
writable = ["../up", "/etc", "ok", "a/../../b"]
on_resume = "maybe"
ok_exit_codes = [0, 300]
network = "no"
env = ["PATH", "1BAD", "PATH"]
[commands.a.params.dir]
type = "string"
pattern = "^[a-z]+$"
[commands.a.params.unused]
type = "integer"
[commands.a.params.float]
type = "number"
[commands.Bad]
argv = ["{x}"]
[commands.Bad.params.x]
type = "string"
"#;
    let found = problems(text);
    let expect = [
        (1, "`version`: unknown key"),
        (3, "`commands.a.argv[0]`: the program is an absolute path"),
        (
            3,
            "`commands.a.argv[1]`: the placeholder names no parameter `nothing`",
        ),
        (
            3,
            "`commands.a.argv[2]`: the placeholder `{dir}` is inside a larger element",
        ),
        (4, "`commands.a.colour`: unknown key"),
        (5, "`commands.a.timeout`: invalid duration `soon`"),
        (6, "`commands.a.max_output`: invalid size `lots`"),
        (7, "`commands.a.writable[0]`: a writable folder is relative"),
        (7, "`commands.a.writable[1]`: a writable folder is relative"),
        (7, "`commands.a.writable[3]`: a writable folder is relative"),
        (
            8,
            "`commands.a.on_resume`: expected \"ask\", \"rerun\" or \"fail\"",
        ),
        (
            9,
            "`commands.a.ok_exit_codes`: expected a non-empty list of exit codes",
        ),
        (10, "`commands.a.network`: expected true or false"),
        (11, "`commands.a.env[1]`: a variable's name is letters"),
        (11, "`commands.a.env[2]`: is named twice"),
        (12, "`commands.a.params.dir`: `pattern` is not supported"),
        (
            15,
            "`commands.a.params.unused`: no element of `argv` is `{unused}`",
        ),
        (
            17,
            "`commands.a.params.float`: `type` is \"string\", \"integer\" or \"boolean\"",
        ),
        (
            17,
            "`commands.a.params.float`: no element of `argv` is `{float}`",
        ),
        (19, "`commands.Bad`: a command's name is a lowercase letter"),
        (
            20,
            "`commands.Bad.argv[0]`: the program is fixed, not the parameter `x`",
        ),
    ];
    for (line, start) in expect {
        let wanted = format!("line {line}: {start}");
        assert!(
            found.iter().any(|p| p.starts_with(&wanted)),
            "missing {wanted:?} in:\n{}",
            found.join("\n")
        );
    }
    assert_eq!(found.len(), expect.len(), "{}", found.join("\n"));
    // The lines come in order.
    let lines: Vec<usize> = (found.iter())
        .map(|p| {
            p["line ".len()..]
                .split(':')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(lines.is_sorted(), "{lines:?}");
}

#[test]
fn a_syntax_error_is_told_by_its_line() {
    let found = problems("[commands.a]\nargv = [\"/bin/true\"]\nbroken = \n");
    assert_eq!(found.len(), 1);
    assert!(found[0].starts_with("line 3: invalid TOML"), "{found:?}");
    let found = problems("[commands.a]\nargv = [\"/bin/true\"]\n[commands.a]\n");
    assert!(found[0].starts_with("line 3: invalid TOML"), "{found:?}");
}

#[test]
fn a_placeholder_fills_a_whole_element_or_is_refused() {
    let load = |argv: &str| {
        Commands::parse(&format!(
            "[commands.c]\nargv = {argv}\n[commands.c.params.p]\ntype = \"string\"\n"
        ))
    };
    assert!(load(r#"["/bin/echo", "{p}"]"#).is_ok());
    assert!(load(r#"["/bin/echo", "{p}", "{p}"]"#).is_ok(), "used twice");
    // Braces that name nothing are text.
    assert!(load(r#"["/usr/bin/find", ".", "-exec", "{}", ";", "{p}"]"#).is_ok());
    for inside in [
        r#"["/bin/echo", "--x={p}"]"#,
        r#"["/bin/echo", "{p}{p}"]"#,
        r#"["/bin/echo", "${p}"]"#,
        r#"["/bin/echo", "{{p}}"]"#,
        r#"["/bin/echo", "{p} "]"#,
    ] {
        let found = load(inside).unwrap_err();
        assert!(
            found
                .iter()
                .any(|p| p.contains("is inside a larger element")),
            "{inside}: {found:?}"
        );
    }
    let found = load(r#"["/bin/echo", "{q}"]"#).unwrap_err();
    assert!(found.iter().any(|p| p.contains("names no parameter `q`")));
    assert!(
        found
            .iter()
            .any(|p| p.contains("no element of `argv` is `{p}`"))
    );
    let found = load(r#"["{p}"]"#).unwrap_err();
    assert!(found.iter().any(|p| p.contains("the program is fixed")));
    let found = load(r#"["/bin/echo\u0000", "{p}"]"#).unwrap_err();
    assert!(found.iter().any(|p| p.contains("NUL")), "{found:?}");
    let found = Commands::parse("[commands.c]\nargv = []\n").unwrap_err();
    assert!(found[0].contains("names no program"), "{found:?}");
    let found = Commands::parse("[commands.c]\ntimeout = \"1s\"\n").unwrap_err();
    assert_eq!(
        found,
        ["line 1: `commands.c.argv`: is required: the program and its arguments"]
    );
}

#[test]
fn a_parameter_whose_default_or_flags_cannot_hold_is_refused() {
    let load = |param: &str| {
        Commands::parse(&format!(
            "[commands.c]\nargv = [\"/bin/echo\", \"{{p}}\"]\n[commands.c.params.p]\n{param}\n"
        ))
    };
    assert!(load("type = \"string\"\ndefault = \"x\"").is_ok());
    assert!(load("type = \"integer\"\nallowLeadingDash = true\ndefault = -3").is_ok());
    assert!(load("type = \"string\"\nmultiline = true\nenum = [\"a\", \"b\"]").is_ok());
    for (param, said) in [
        (
            "type = \"string\"\ndefault = \"-rf\"",
            "must not start with `-`",
        ),
        (
            "type = \"integer\"\ndefault = -1",
            "must not start with `-`",
        ),
        ("type = \"string\"\ndefault = \"a\\nb\"", "line break"),
        (
            "type = \"string\"\nmaxLength = 2\ndefault = \"abc\"",
            "`default`:",
        ),
        (
            "type = \"integer\"\nmultiline = true",
            "`multiline` goes with",
        ),
        (
            "type = \"boolean\"\nallowLeadingDash = true",
            "`allowLeadingDash` goes",
        ),
        (
            "type = \"string\"\nmultiline = \"yes\"",
            "`multiline` is true or false",
        ),
        ("type = [\"string\", \"null\"]", "`type` is"),
        ("maxLength = 3", "`type` is"),
        (
            "type = \"string\"\nshell = true",
            "allowLeadingDash, multiline",
        ),
    ] {
        let found = load(param).unwrap_err();
        assert!(found.iter().any(|p| p.contains(said)), "{param}: {found:?}");
        assert!(found.iter().all(|p| p.starts_with("line 3: ")), "{found:?}");
    }
}

#[test]
fn sizes_durations_and_counts_out_of_bounds_are_refused() {
    for (key, value, said) in [
        ("timeout", "\"0s\"", "longer than 0s"),
        ("timeout", "\"25h\"", "at most 24h"),
        ("timeout", "30", "expected a string"),
        ("max_output", "\"65MiB\"", "at most 64MiB"),
        ("max_output", "0", "at least 1 byte"),
        ("max_memory", "-1", "expected a size"),
        ("max_processes", "0", "at least 1"),
        ("max_file_size", "true", "expected a size"),
        ("ok_exit_codes", "[]", "non-empty list"),
        ("ok_exit_codes", "[-1]", "non-empty list"),
        ("description", "1", "expected a string"),
        ("when", "1979-05-27", "datetimes are not allowed"),
        ("writable", "[\"\"]", "a writable folder is relative"),
        ("env", "\"PATH\"", "expected a list of strings"),
    ] {
        let text = format!("[commands.c]\nargv = [\"/bin/true\"]\n{key} = {value}\n");
        let found = problems(&text);
        assert!(
            found
                .iter()
                .any(|p| p.starts_with("line 3: ") && p.contains(said)),
            "{key} = {value}: {found:?}"
        );
    }
}

#[test]
fn the_workspace_itself_may_be_writable() {
    let text = "[commands.c]\nargv = [\"/bin/true\"]\nwritable = [\".\", \"./\"]\n";
    let commands = Commands::parse(text).unwrap();
    assert_eq!(commands.get("c").unwrap().writable, [PathBuf::from(".")]);
}

fn write_file(dir: &tempfile::TempDir, text: &str, mode: u32) -> PathBuf {
    let path = dir.path().join("commands.toml");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

#[test]
fn a_file_its_group_or_others_may_write_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    for mode in [0o600, 0o644, 0o400] {
        let path = write_file(&dir, FULL, mode);
        assert_eq!(Commands::load(&path).unwrap().len(), 2, "{mode:o}");
    }
    for mode in [0o620, 0o602, 0o666, 0o664] {
        let path = write_file(&dir, FULL, mode);
        let LoadError { problems, .. } = Commands::load(&path).unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("its group or others may write it"));
        assert!(
            problems[0].contains(&format!("`chmod go-w {}`", path.display())),
            "{problems:?}"
        );
    }
    // Its permissions and its content, all at once.
    let path = write_file(&dir, "[commands.c]\nargv = [\"true\"]\n", 0o666);
    let error = Commands::load(&path).unwrap_err();
    assert_eq!(error.problems.len(), 2, "{error}");
    assert!(error.problems[1].starts_with("line 2: "), "{error}");
    assert!(error.to_string().starts_with("commands file "), "{error}");
}

#[test]
fn a_file_owned_by_another_user_than_the_server_or_root_is_refused() {
    use std::os::unix::fs::MetadataExt as _;
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(&dir, FULL, 0o644);
    let permission_problems = super::file::permission_problems;
    let metadata = std::fs::metadata(&path).unwrap();
    let owner = metadata.uid();
    assert!(permission_problems(&metadata, owner, &path).is_empty());
    let found = permission_problems(&metadata, owner + 1, &path);
    match owner {
        // Root's files are trusted by a server of any user.
        0 => assert!(found.is_empty(), "{found:?}"),
        _ => assert!(found[0].contains("neither this server's user"), "{found:?}"),
    }
    if owner == 0 {
        // Root may give the file away: then a server running as root refuses it.
        std::os::unix::fs::chown(&path, Some(4242), None).unwrap();
        let metadata = std::fs::metadata(&path).unwrap();
        let found = permission_problems(&metadata, 0, &path);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("it is owned by uid 4242"), "{found:?}");
        assert!(found[0].contains("`chown 0 "), "{found:?}");
    }
}

#[test]
fn a_missing_file_or_a_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let error = Commands::load(&dir.path().join("nope.toml")).unwrap_err();
    assert!(error.problems[0].starts_with("cannot read it"), "{error}");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let error = Commands::load(dir.path()).unwrap_err();
    assert!(
        error
            .problems
            .iter()
            .any(|p| p.contains("not a regular file")),
        "{error}"
    );
}

#[test]
fn a_failed_reload_leaves_the_commands_in_force_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(&dir, FULL, 0o600);
    let mut in_force = Commands::load(&path).unwrap();
    std::fs::write(&path, "[commands.list]\nargv = [\"ls\"]\n").unwrap();
    if let Ok(reloaded) = Commands::load(&path) {
        in_force = reloaded;
    }
    assert_eq!(in_force.len(), 2);
    std::fs::write(&path, "[commands.only]\nargv = [\"/bin/true\"]\n").unwrap();
    if let Ok(reloaded) = Commands::load(&path) {
        in_force = reloaded;
    }
    assert_eq!(in_force.names().collect::<Vec<_>>(), ["only"]);
}
